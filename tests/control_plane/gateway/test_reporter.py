"""The reporter's acknowledgements: an event's future resolves only once it is in Redis, and
stays pending through an outage (the finisher marks a request finished only after that)."""

from __future__ import annotations

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
