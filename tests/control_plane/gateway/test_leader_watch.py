"""The gateway's leader watch against a real redis-server: no leader, a stall, a new leader."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import AsyncIterator

import pytest

from control_plane.gateway.grants import GrantWaiter
from control_plane.gateway.leader_watch import LeaderWatch
from control_plane.state import StateStores
from control_plane.state.tasks import stop_tasks
from tests.support.redis_server import RedisServer

BOUND = 0.6


@pytest.fixture
async def stores(redis_url: str) -> AsyncIterator[StateStores]:
    s = StateStores.open(redis_url, "watch-test")
    yield s
    await s.aclose()


async def test_down_is_set_after_the_bound_without_a_leader_and_cleared_by_one(
    stores: StateStores,
) -> None:
    watch = LeaderWatch(stores.lease, BOUND, interval_s=0.05)
    runner = asyncio.create_task(watch.run())
    try:
        started = time.monotonic()
        await asyncio.wait_for(watch.down.wait(), timeout=BOUND + 1.0)
        assert time.monotonic() - started >= BOUND - 0.05
        assert watch.status()["leader"] is None

        assert await stores.lease.acquire("sched-1", 5.0, now=time.time())
        await asyncio.sleep(0.3)
        assert not watch.down.is_set()
        assert watch.status()["leader"] == "sched-1"
        assert watch.seconds_without_leader() == 0.0
    finally:
        await stop_tasks([runner])


async def test_a_stalled_redis_counts_as_no_leader_and_no_probe_hangs(
    stores: StateStores, redis_server: RedisServer
) -> None:
    assert await stores.lease.acquire("sched-1", 30.0, now=time.time())
    watch = LeaderWatch(stores.lease, BOUND, interval_s=0.05, probe_timeout_s=0.2)
    waiter = GrantWaiter(stores.grants, "gw-1", _no_orphans, watch)
    runner = asyncio.create_task(waiter.run())
    assert redis_server.proc is not None
    try:
        await asyncio.sleep(0.2)
        assert not waiter.no_leader.is_set()
        os.kill(redis_server.proc.pid, signal.SIGSTOP)
        try:
            paused_at = time.monotonic()
            await asyncio.wait_for(waiter.no_leader.wait(), timeout=BOUND + 1.0)
            assert time.monotonic() - paused_at < BOUND + 0.6
            assert str(watch.status()["leader_state"]).startswith("redis unavailable")
        finally:
            os.kill(redis_server.proc.pid, signal.SIGCONT)
        await asyncio.sleep(0.5)
        assert not waiter.no_leader.is_set()  # the holder key (30 s) survived the stall
    finally:
        await stop_tasks([runner])


async def _no_orphans(grant: object) -> None:
    raise AssertionError(f"unexpected grant {grant}")
