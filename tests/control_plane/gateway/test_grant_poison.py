"""A malformed entry in a gateway's grants stream is dead-lettered; the grants after it are
still delivered and the reader keeps running."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from control_plane.contracts.grants import Grant
from control_plane.gateway.grants import GrantWaiter
from control_plane.state import StateStores
from control_plane.state.tasks import stop_tasks
from tests.support.envelopes import envelope

NOW = 1_700_000_000.0


@pytest.fixture
async def stores(redis_url: str) -> AsyncIterator[StateStores]:
    s = StateStores.open(redis_url, "grant-poison")
    yield s
    await s.aclose()


async def _no_orphans(grant: Grant) -> None:
    raise AssertionError(f"unexpected orphan {grant}")


async def test_a_bad_grant_does_not_stop_the_reader(stores: StateStores) -> None:
    waiter = GrantWaiter(stores.grants, "gw-1", _no_orphans)
    waiter.start_after(await stores.grants.latest_id("gw-1"))
    fut = waiter.expect("r1")
    reader = asyncio.create_task(waiter.run())
    try:
        stream = stores.keyspace.grants("gw-1")
        await stores.redis.xadd(stream, {"id": "r0", "worker_id": "w"})  # no worker_url
        await stores.redis.xadd(
            stream, {"id": "r9", "worker_id": "w", "worker_url": "u", "granted_at": "soon"}
        )
        await stores.requests.submit(
            envelope("r1"), request_id="r1", tenant="t", gateway_id="gw-1", queue_cap=9, now=NOW
        )
        assert await stores.requests.grant("r1", worker_id="w1", worker_url="http://w1", now=NOW)
        grant = await asyncio.wait_for(fut, timeout=5.0)
        assert (grant.request_id, grant.worker_url) == ("r1", "http://w1")
        assert not reader.done()
    finally:
        await stop_tasks([reader])
    letters = await stores.dead_letters.list()
    assert sorted(x.fields["id"] for x in letters) == ["r0", "r9"]
    assert {x.consumer for x in letters} == {"gateway"}
