"""The reporter's acknowledgements: an event's future resolves only once it is in Redis, and
stays pending through an outage (the finisher marks a request finished only after that)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from control_plane.contracts.events import Event, WorkerFailed
from control_plane.gateway.reporter import EventReporter
from control_plane.state import StateStores, StateUnavailable


class Route:
    """Publishes to whichever real event stream is current (Redis down, then up)."""

    def __init__(self, stores: StateStores) -> None:
        self.stores = stores

    async def publish(self, events: Sequence[Event]) -> list[str]:
        return await self.stores.events.publish(events)


async def test_an_ack_resolves_when_its_event_is_in_redis(redis_url: str) -> None:
    stores = StateStores.open(redis_url, "rep")
    try:
        reporter = EventReporter(stores.events)
        ack = reporter.emit(WorkerFailed("r1", "w1", "boom", 1.0))
        reporter.progress("r2", 5, 1.0)
        assert not ack.done()
        await reporter.flush()
        assert ack.done()
        assert await stores.redis.xlen(stores.keyspace.events) == 2
    finally:
        await stores.aclose()


async def test_an_ack_stays_pending_through_an_outage(redis_url: str) -> None:
    down = StateStores.open("redis://127.0.0.1:1/0", "rep")
    up = StateStores.open(redis_url, "rep")
    try:
        route = Route(down)
        reporter = EventReporter(route)
        first = reporter.emit(WorkerFailed("r1", "w1", "boom", 1.0))
        with pytest.raises(StateUnavailable):
            await reporter.flush()
        second = reporter.emit(WorkerFailed("r2", "w1", "boom", 2.0))
        assert not first.done() and not second.done()

        route.stores = up  # Redis is back
        await reporter.flush()
        assert first.done() and second.done()
        entries = await up.redis.xrange(up.keyspace.events)
        assert ['"r1"' in e[1]["data"] for e in entries] == [True, False]
    finally:
        await down.aclose()
        await up.aclose()


async def test_the_loop_flushes_an_urgent_event_at_once_and_ends_when_cancelled(
    redis_url: str,
) -> None:
    """An urgent event does not wait for the interval; a cancelled loop flushes what is left
    and ends."""
    stores = StateStores.open(redis_url, "rep-loop")
    try:
        reporter = EventReporter(stores.events, interval=30.0)
        loop = asyncio.create_task(reporter.run())
        await asyncio.sleep(0)
        ack = reporter.emit(WorkerFailed("r1", "w1", "boom", 1.0))
        async with asyncio.timeout(5.0):  # far below the 30 s interval
            await ack
        reporter.progress("r2", 7, 2.0)  # not urgent: left for the next flush
        for _ in range(3):
            await asyncio.sleep(0)
        assert await stores.redis.xlen(stores.keyspace.events) == 1
        loop.cancel()
        with pytest.raises(asyncio.CancelledError):
            async with asyncio.timeout(5.0):
                await loop
        assert await stores.redis.xlen(stores.keyspace.events) == 2
    finally:
        await stores.aclose()
