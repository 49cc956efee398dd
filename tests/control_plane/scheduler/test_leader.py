"""Leader election against a real redis-server: losing the lease, stalls, re-acquisition.

Some tests pause the session's redis-server with SIGSTOP (a stall: connections stay open, no
answers) and always resume it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager

import pytest

from control_plane.scheduler.leader import (
    VALIDITY,
    LeaderTerm,
    keep_lease,
    wait_for_lease,
)
from control_plane.scheduler.service import SchedulerService
from control_plane.settings import Settings
from control_plane.state import StateStores
from control_plane.state.tasks import stop_tasks
from tests.support.redis_server import RedisServer
from tests.support.waiting import until

TTL = 0.5


@pytest.fixture
async def stores(redis_url: str) -> AsyncIterator[StateStores]:
    s = StateStores.open(redis_url, "leader-test")
    yield s
    await s.aclose()


@contextmanager
def paused(server: RedisServer) -> Iterator[None]:
    assert server.proc is not None
    os.kill(server.proc.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)


async def test_a_lost_lease_ends_the_term_and_is_taken_again_with_a_new_token(
    stores: StateStores,
) -> None:
    lease, ks = stores.lease, stores.keyspace
    term = await wait_for_lease(lease, "A", TTL)
    keeper = asyncio.create_task(keep_lease(lease, "A", term))
    await asyncio.sleep(TTL)  # a few renewals
    assert term.active() and not keeper.done()

    await stores.redis.set(ks.leader, "B", px=int(TTL * 1000))  # someone else took it over
    await asyncio.wait_for(keeper, timeout=TTL)
    assert not term.active()

    again = await asyncio.wait_for(wait_for_lease(lease, "A", TTL), timeout=3 * TTL)
    assert again.active()
    assert again.token > term.token
    assert await lease.holder() == "A"


async def test_the_same_holder_gets_a_new_token_for_every_tenure(stores: StateStores) -> None:
    first = await wait_for_lease(stores.lease, "A", TTL)
    second = await wait_for_lease(stores.lease, "A", TTL)  # its key has not expired yet

    assert second.token == first.token + 1
    assert await stores.lease.current_token() == second.token


async def test_a_stalled_redis_ends_the_term_in_time_and_the_lease_is_taken_again(
    stores: StateStores, redis_server: RedisServer
) -> None:
    term = await wait_for_lease(stores.lease, "A", TTL)
    keeper = asyncio.create_task(keep_lease(stores.lease, "A", term))
    await asyncio.sleep(TTL / 2)
    with paused(redis_server):
        paused_at = time.monotonic()
        await asyncio.wait_for(keeper, timeout=3 * TTL)  # never stuck in a socket read
        stepped_down = time.monotonic() - paused_at
        assert not term.active()
        await asyncio.sleep(2 * TTL)  # the key expires while Redis is paused
    assert stepped_down <= VALIDITY * TTL + 0.2

    again = await asyncio.wait_for(wait_for_lease(stores.lease, "A", TTL), timeout=3.0)
    assert again.token > term.token


def test_a_term_is_valid_only_within_its_share_of_the_ttl() -> None:
    now = [100.0]
    term = LeaderTerm(7, ttl_s=1.0, started_at=100.0, clock=lambda: now[0])
    now[0] = 100.0 + VALIDITY - 0.01
    assert term.active()
    term.extend(100.5)
    now[0] = 100.5 + VALIDITY - 0.01
    assert term.active()
    now[0] = 100.5 + VALIDITY
    assert not term.active()
    term.extend(now[0])
    assert term.active()
    term.end()
    assert not term.active() and term.remaining_s() == 0.0


async def test_scheduler_leads_again_after_redis_is_paused_past_its_lease(
    redis_url: str, redis_server: RedisServer
) -> None:
    """Regression: after a stall the leader's tasks ignored their cancellation, `_lead` waited
    for them forever and the replica neither led nor went back to standby."""
    settings = Settings(redis_url=redis_url, cluster="stall", lease_ttl_s=TTL)
    stores = StateStores.open(redis_url, "stall")
    service = SchedulerService(settings, stores, "sched-a")
    runner = asyncio.create_task(service.run())
    try:
        await until(lambda: service.leading, 5.0)
        first = service.fencing_token
        assert first is not None
        with paused(redis_server):
            await asyncio.sleep(VALIDITY * TTL + 0.3)
            assert not service.leading  # stepped down although Redis never answered
            await asyncio.sleep(3.0)
        await until(lambda: service.leading, 5.0)
        token = service.fencing_token
        assert token is not None and token > first
        assert await stores.lease.holder() == "sched-a"
        assert await stores.lease.current_token() == token
    finally:
        await stop_tasks([runner])
        await service.http.aclose()
        await stores.aclose()
