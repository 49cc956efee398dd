"""Finishing flights: every finished request is marked in Redis after its completion event is
published, those that end together in one script call, and an outage only delays the marks."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any, cast

import pytest
from redis.asyncio import Redis

from control_plane.gateway.deps import GatewayDeps
from control_plane.gateway.finish import Finisher
from control_plane.gateway.flight import Flight
from control_plane.gateway.metrics import GatewayMetrics
from control_plane.gateway.reporter import EventReporter
from control_plane.state import GrantOrder, KeySpace, StateStores, StateUnavailable, connect
from tests.control_plane.gateway.test_door import flight_of
from tests.support.envelopes import envelope

N = 40


class CountingStore:
    """The real request store, counting its `finish_many` calls (and failing the first
    `fail` of them as an unreachable Redis would)."""

    def __init__(self, store: Any, fail: int = 0) -> None:
        self._store = store
        self.calls: list[int] = []
        self.fail = fail

    async def finish_many(self, items: list[tuple[str, str]], *, now: float) -> list[bool]:
        self.calls.append(len(items))
        if self.fail:
            self.fail -= 1
            raise StateUnavailable("Redis is down")
        result: list[bool] = await self._store.finish_many(items, now=now)
        return result


@pytest.fixture
async def stores(redis_url: str) -> AsyncIterator[StateStores]:
    client: Redis = connect(redis_url, client_name="finish-tests")
    yield StateStores.build(client, KeySpace("finish"))
    await client.aclose()


async def _granted_flights(stores: StateStores) -> list[Flight]:
    flights = []
    for i in range(N):
        flight = flight_of({"model": "m", "prompt": f"p{i}"})
        rid = flight.job.id
        await stores.requests.submit(
            envelope(rid, "acme"), request_id=rid, tenant="acme", gateway_id="gw",
            queue_cap=1000, now=0.0,
        )  # fmt: skip
        await stores.requests.grant_many([GrantOrder(rid, "w1", "http://w1")], now=0.0)
        flights.append(flight)
    return flights


async def _finished(stores: StateStores, flights: list[Flight], fail: int) -> CountingStore:
    reporter = EventReporter(stores.events, interval=0.01)
    counting = CountingStore(stores.requests, fail)
    deps = SimpleNamespace(
        requests=counting, reporter=reporter, metrics=GatewayMetrics(), limits=None
    )
    finisher = Finisher(cast(GatewayDeps, deps))
    flushing = asyncio.create_task(reporter.run())
    try:
        await asyncio.gather(*(finisher.finish(f, "ok", None) for f in flights))
        await finisher.settled()
    finally:
        flushing.cancel()
    return counting


async def test_flights_that_end_together_are_marked_in_one_call(stores: StateStores) -> None:
    flights = await _granted_flights(stores)

    counting = await _finished(stores, flights, fail=0)

    assert counting.calls == [N]  # all ended before the first mark: one script call
    assert await stores.requests.inflight() == {}
    for flight in flights:
        assert await stores.requests.status(flight.id) == "ok"
    events = await stores.events.read("recorder", "r", count=1000, block_ms=None)
    assert sorted(e.id for _, e in events) == sorted(f.id for f in flights)


async def test_an_outage_delays_the_marks_and_loses_none(stores: StateStores) -> None:
    flights = await _granted_flights(stores)

    counting = await _finished(stores, flights, fail=2)

    assert counting.calls == [N, N, N]  # retried with backoff (0.25 s, then 0.5 s)
    assert await stores.requests.inflight() == {}
