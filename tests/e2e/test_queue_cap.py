"""A tenant's full queue: 429 in OpenAI's shape with Retry-After, nothing accepted is lost, and
`arbiter sim replay` records the refusals as `rejected` (the status the simulator gives them)."""

from __future__ import annotations

import asyncio
import time

import httpx

from control_plane.core.job import Slo
from control_plane.sim.live_bench import LiveTarget, replay
from control_plane.sim.workload import RequestSpec
from storage.db import Database
from tests.support.cluster import Cluster

CAP = 2
BURST = 12
BODY = {"model": "tiny-llama", "prompt": "hello there", "max_tokens": 40, "ignore_eos": True}


def _set_cap(cluster: Cluster, tenant: str, cap: int) -> None:
    db = Database(cluster.db_url)
    with db.repos() as r:
        r.tenants.update_tenant(name=tenant, changes={"queue_cap": cap})
    db.dispose()


def _rows(cluster: Cluster, tenant: str, want: int) -> int:
    db = Database(cluster.db_url)
    try:
        deadline = time.monotonic() + 15
        while True:
            with db.repos() as r:
                n = len(r.requests.list(tenant=tenant, limit=1000))
            if n >= want or time.monotonic() > deadline:
                return n
            time.sleep(0.2)
    finally:
        db.dispose()


async def _burst(url: str, key: str) -> list[httpx.Response]:
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(timeout=60) as client:
        return await asyncio.gather(
            *(
                client.post(f"{url}/v1/completions", json=BODY, headers=headers)
                for _ in range(BURST)
            )
        )


def test_full_queue_gets_429_and_loses_nothing(cluster: Cluster) -> None:
    keys = cluster.tenants(["t"])
    _set_cap(cluster, "t", CAP)
    cluster.start_worker(speed=1.0, max_num_seqs=1)
    cluster.start_scheduler()
    url = cluster.start_gateway()

    responses = asyncio.run(_burst(url, keys["t"]))
    ok = [r for r in responses if r.status_code == 200]
    refused = [r for r in responses if r.status_code == 429]
    assert len(ok) + len(refused) == BURST, [r.status_code for r in responses]
    assert refused and len(ok) >= CAP
    for r in refused:
        assert r.headers["Retry-After"] == "1"
        body = r.json()
        assert set(body) == {"error"}
        assert body["error"]["code"] == "queue_full"
        assert body["error"]["type"] == "rate_limit_error"
        assert f"cap {CAP}" in body["error"]["message"]
    for r in ok:
        assert r.json()["usage"]["completion_tokens"] == 40
    assert _rows(cluster, "t", len(ok)) == len(ok)  # every accepted request, once; no refusal

    specs = [
        RequestSpec(
            f"r{i}", 0.0, "t", "default", "default", "tiny-llama", None, None, 8, 40, Slo(), 0
        )
        for i in range(BURST)
    ]
    records = asyncio.run(replay(specs, {}, LiveTarget(url, keys, timeout_s=60)))
    statuses = [r.status for r in records]
    assert set(statuses) == {"ok", "rejected"}, statuses
    assert all(r.dispatched is None and r.n_out == 0 for r in records if r.status == "rejected")
