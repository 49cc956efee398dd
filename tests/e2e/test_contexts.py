"""Workers of one model with different contexts, with real processes: a request that only the
longer one can hold is sent there, never refused by the shorter one (or cut short by it).

Before, placement (and the fast lane) chose by load alone: the door let the request through
(it fits the longest context), and about half such requests met the shorter worker's 400
(`max_tokens=3000 cannot be greater than max_model_len=2048`).
"""

from __future__ import annotations

import asyncio
import time

import httpx

from storage.db import Database
from tests.support.cluster import Cluster

REQUESTS = 8


def _until_contexts_known(url: str, h: dict[str, str], shortest: int) -> None:
    """The leader scrapes each worker's context after it registers; until it has both, the
    gateway's catalog does not know the shortest."""
    deadline = time.monotonic() + 15
    models: list[dict[str, object]] = []
    while time.monotonic() < deadline:
        models = httpx.get(f"{url}/v1/models", headers=h, timeout=10).json()["data"]
        if any(m.get("max_model_len") == shortest for m in models):
            return
        time.sleep(0.2)
    raise AssertionError(f"contexts not known: {models}")


def test_a_request_past_the_shorter_context_goes_to_the_longer_worker(cluster: Cluster) -> None:
    keys = cluster.tenants(["t"])
    cluster.start_worker(speed=200.0, max_num_seqs=4)  # sim-0: the profile's 2,048
    cluster.start_worker(speed=200.0, max_num_seqs=4, extra=["--max-model-len", "8192"])
    cluster.start_scheduler()
    url = cluster.start_gateway()
    h = {"Authorization": f"Bearer {keys['t']}"}
    _until_contexts_known(url, h, 2048)
    time.sleep(1.0)  # both workers scraped by the leader too
    body = {"model": "tiny-llama", "prompt": list(range(1, 101)), "max_tokens": 3000}

    async def send() -> list[httpx.Response]:
        async with httpx.AsyncClient(timeout=60) as client:
            sent = [
                client.post(f"{url}/v1/completions", json=body, headers=h) for _ in range(REQUESTS)
            ]
            return await asyncio.gather(*sent)

    answers = asyncio.run(send())
    assert [r.status_code for r in answers] == [200] * REQUESTS, [r.text for r in answers]
    ids = {r.headers["X-Arbiter-Request-Id"] for r in answers}
    assert set(_workers_of(cluster, ids).values()) == {"sim-1"}


def _workers_of(cluster: Cluster, ids: set[str]) -> dict[str, str | None]:
    db = Database(cluster.db_url)
    try:
        deadline = time.monotonic() + 10
        while True:
            with db.reader() as r:
                rows = {x.id: x.worker for x in r.requests.list(limit=100) if x.id in ids}
            if len(rows) == len(ids) or time.monotonic() > deadline:
                return rows
            time.sleep(0.2)
    finally:
        db.dispose()
