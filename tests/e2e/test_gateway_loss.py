"""A gateway replica killed with kill -9: the leader releases what it left behind.

Gateway A holds two streaming requests on the only worker (max_num_seqs 2) and two more queued.
After A dies, within `gateway_dead_after_s` + the leader's confirmation (2 heartbeats) + a sweep
interval (+ slack) its running requests are aborted (the worker's slots are free again: a
request through gateway B is served), its queued ones are withdrawn, nothing of A stays in the
queue or in flight, and SQL holds exactly one row per request of A, with the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

import httpx
import pytest

from control_plane.state import StateStores
from storage.db import Database
from storage.records import RequestRecord
from tests.support.cluster import Cluster

HEARTBEAT_S = 1.0
DEAD_AFTER_S = 3.0
CONFIRM_S = 2 * HEARTBEAT_S  # the leader's own confirmation (GatewaySweeper)
SWEEP_S = 1.0
SLACK_S = 3.0
LONG = {
    "model": "tiny-llama",
    "prompt": "tell me a long story",
    "max_tokens": 1500,
    "ignore_eos": True,
    "stream": True,
}
SHORT = {"model": "tiny-llama", "prompt": "hi", "max_tokens": 8, "ignore_eos": True}


async def _hold(client: httpx.AsyncClient, url: str, headers: dict[str, str]) -> None:
    """A long stream through the doomed gateway: read until the connection breaks."""
    with contextlib.suppress(httpx.HTTPError):
        async with client.stream("POST", f"{url}/v1/completions", json=LONG, headers=headers) as r:
            async for _ in r.aiter_lines():
                pass


async def _snapshot(stores: StateStores) -> tuple[list[str], list[str]]:
    return await stores.requests.queued_ids(), sorted(await stores.requests.inflight())


async def _wait_for(stores: StateStores, queued: int, running: int, limit_s: float) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        q, r = await _snapshot(stores)
        if (len(q), len(r)) == (queued, running):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"expected {queued} queued, {running} running: {await _snapshot(stores)}")


def _rows(db_url: str, ids: set[str], limit_s: float) -> list[RequestRecord]:
    db = Database(db_url)
    deadline = time.monotonic() + limit_s
    try:
        while True:
            with db.reader() as r:
                rows = [row for row in r.requests.list(limit=1000) if row.id in ids]
            if len(rows) >= len(ids) or time.monotonic() > deadline:
                return rows
            time.sleep(0.2)
    finally:
        db.dispose()


@pytest.mark.parametrize("fast_path", [False, True], ids=["queued", "fast-lane"])
def test_a_lost_gateways_requests_are_released(cluster: Cluster, fast_path: bool) -> None:
    cluster.extra_env["ARBITER_FAST_PATH"] = "1" if fast_path else "0"
    cluster.extra_env["ARBITER_GATEWAY_HEARTBEAT_S"] = str(HEARTBEAT_S)
    cluster.extra_env["ARBITER_GATEWAY_DEAD_AFTER_S"] = str(DEAD_AFTER_S)
    cluster.extra_env["ARBITER_GATEWAY_SWEEP_INTERVAL_S"] = str(SWEEP_S)
    keys = cluster.tenants(["t"])
    cluster.start_worker(speed=0.2, max_num_seqs=2)
    cluster.start_scheduler()
    url_a = cluster.start_gateway()
    gateway_a = next(c for c in cluster.children if c.name == "gateway-0")
    url_b = cluster.start_gateway()
    h = {"Authorization": f"Bearer {keys['t']}"}

    async def scenario() -> tuple[list[str], list[str], str, float, httpx.Response]:
        stores = StateStores.open(cluster.redis_url, cluster.cluster)
        async with httpx.AsyncClient(timeout=60) as client:
            holders = [asyncio.create_task(_hold(client, url_a, h)) for _ in range(4)]
            await _wait_for(stores, queued=2, running=2, limit_s=10)
            queued, running = await _snapshot(stores)
            records = await stores.requests.load_many([*queued, *running])
            owners = {rec.gateway for rec in records}
            assert len(owners) == 1, owners
            cluster.kill9(gateway_a)
            killed = time.monotonic()
            served = await client.post(f"{url_b}/v1/completions", json=SHORT, headers=h)
            after = time.monotonic() - killed
            await _wait_for(stores, queued=0, running=0, limit_s=SLACK_S)
            await asyncio.gather(*holders)
        await stores.aclose()
        return queued, running, owners.pop(), after, served

    queued, running, gateway_id, after, served = asyncio.run(scenario())
    print(f"\nrequest through gateway B served {after:.2f}s after gateway A was killed")
    assert served.status_code == 200, served.text
    assert served.json()["usage"]["completion_tokens"] == 8
    assert after < DEAD_AFTER_S + CONFIRM_S + SWEEP_S + SLACK_S

    rows = _rows(cluster.db_url, {*queued, *running}, limit_s=10)
    assert sorted(row.id for row in rows) == sorted([*queued, *running])  # one row each
    status = {row.id: row.status for row in rows}
    assert all(status[rid] == "aborted" for rid in running)
    # a queued one may have been granted to the dead gateway just before the sweep
    assert all(status[rid] in ("withdrawn", "aborted") for rid in queued)
    assert all(row.error == f"gateway {gateway_id} lost" for row in rows)
