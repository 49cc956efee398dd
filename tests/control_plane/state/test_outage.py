"""Redis going away: every store raises StateUnavailable quickly, then recovers by itself.

These tests stop the session's shared redis-server and always start it again (same port).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from control_plane.contracts.events import Progress
from control_plane.contracts.knobs import Other, PluginChoice
from control_plane.state import StateStores, StateUnavailable, ping
from control_plane.state.inflight_view import NO_ENTRY
from tests.support.envelopes import envelope
from tests.support.redis_server import RedisServer

NOW = 1_700_000_000.0


@contextmanager
def redis_down(server: RedisServer) -> Iterator[None]:
    server.stop()
    try:
        yield
    finally:
        server.start()


def calls(stores: StateStores) -> dict[str, Callable[[], Awaitable[Any]]]:
    req = stores.requests
    return {
        "submit": lambda: req.submit(
            envelope("x"), request_id="x", tenant="a", gateway_id="gw", queue_cap=5, now=NOW
        ),
        "grant": lambda: req.grant("r1", worker_id="w", worker_url="u", now=NOW),
        "get": lambda: req.get("r1"),
        "load_queued": req.load_queued,
        "arrivals.read": lambda: stores.arrivals.read_after(NO_ENTRY, block_ms=None),
        "grants.read": lambda: stores.grants.read("gw", "0-0", block_ms=None),
        "events.publish": lambda: stores.events.publish([Progress("r1", 1, NOW)]),
        "lease.acquire": lambda: stores.lease.acquire("s", 1.0, now=NOW),
        "workers.list": stores.workers.list,
        "knobs.set": lambda: stores.knobs.set("k", Other(1)),
        "checkpoint.load": lambda: stores.checkpoints.load("policy"),
        "rate.allow": lambda: stores.rate_limiter.allow("a", 1.0, 1.0, NOW),
        "ping": lambda: ping(stores.redis),
    }


async def test_outage_raises_state_unavailable_fast_and_service_recovers(
    stores: StateStores, redis_server: RedisServer
) -> None:
    await stores.arrivals.ensure_group()
    await stores.requests.submit(
        envelope("r1"), request_id="r1", tenant="a", gateway_id="gw", queue_cap=5, now=NOW
    )

    with redis_down(redis_server):
        for name, call in calls(stores).items():
            start = time.perf_counter()
            with pytest.raises(StateUnavailable):
                await call()
            assert time.perf_counter() - start < 3.0, f"{name} took too long to fail"

    # The restarted server is empty: no scripts, no consumer group. Both heal on first use.
    result = await stores.requests.submit(
        envelope("r2"), request_id="r2", tenant="a", gateway_id="gw", queue_cap=5, now=NOW
    )
    assert result.accepted and result.seq == 1
    read = await stores.arrivals.read_after(NO_ENTRY, block_ms=None)
    assert [a.id for a in read.arrivals] == ["r2"]
    assert await stores.requests.grant("r2", worker_id="w", worker_url="u", now=NOW)
    assert await ping(stores.redis) < 1.0


async def test_a_blocked_reader_and_a_subscription_fail_cleanly_when_redis_stops(
    stores: StateStores, redis_server: RedisServer
) -> None:
    await stores.events.ensure_groups()
    subscription = await stores.knobs.subscribe()
    reader = asyncio.create_task(stores.events.read("scheduler", "s", block_ms=4000))
    await asyncio.sleep(0.2)
    try:
        with redis_down(redis_server):
            with pytest.raises(StateUnavailable):
                await asyncio.wait_for(reader, timeout=5)
            with pytest.raises(StateUnavailable):
                await asyncio.wait_for(anext(subscription), timeout=5)
    finally:
        await subscription.aclose()

    async with await stores.knobs.subscribe() as fresh:
        assert await stores.knobs.set("policy", PluginChoice("fcfs")) == 1
        assert (await asyncio.wait_for(anext(fresh), timeout=2)).value == PluginChoice("fcfs")
