"""Finishing flights: every finished request is marked in Redis with or after its completion
event, those that end together in one transaction (or, where the sink cannot mark, in one
script call after their events), and an outage only delays the marks."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from types import SimpleNamespace
from typing import Any, cast

import pytest
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from control_plane.contracts.events import Complete, Event, decode, encode
from control_plane.contracts.grants import Grant
from control_plane.gateway.deps import GatewayDeps
from control_plane.gateway.finish import Finisher
from control_plane.gateway.flight import Flight
from control_plane.gateway.metrics import GatewayMetrics
from control_plane.gateway.reporter import EventReporter, EventSink
from control_plane.recorder.rows import request_row
from control_plane.state import GrantOrder, KeySpace, StateStores, StateUnavailable, connect
from tests.control_plane.gateway.test_door import flight_of
from tests.support.envelopes import envelope

N = 40


class CountingStore:
    """The real request store, counting its `finish_many` calls (refusing the first `refuse`
    of them as Redis refuses a command, then failing `fail` as an unreachable Redis would)."""

    def __init__(self, store: Any, fail: int = 0, refuse: int = 0) -> None:
        self._store = store
        self.calls: list[int] = []
        self.fail = fail
        self.refuse = refuse

    async def finish_many(self, items: list[tuple[str, str]], *, now: float) -> list[bool]:
        self.calls.append(len(items))
        if self.refuse:
            self.refuse -= 1
            raise ResponseError("ERR refused by the test")
        if self.fail:
            self.fail -= 1
            raise StateUnavailable("Redis is down")
        result: list[bool] = await self._store.finish_many(items, now=now)
        return result


class FailingSink:
    """The real sink, failing its first `fail` publishes as an unreachable Redis would."""

    def __init__(self, sink: EventSink, fail: int) -> None:
        self._sink = sink
        self.fail = fail

    async def publish(
        self, events: Sequence[Event], finished: Sequence[tuple[str, str]], *, now: float
    ) -> bool:
        if self.fail:
            self.fail -= 1
            raise StateUnavailable("Redis is down")
        return await self._sink.publish(events, finished, now=now)


@pytest.fixture
async def stores(redis_url: str) -> AsyncIterator[StateStores]:
    client: Redis = connect(redis_url, client_name="finish-tests")
    yield StateStores.build(client, KeySpace("finish"))
    await client.aclose()


@pytest.fixture
async def plain(redis_url: str) -> AsyncIterator[StateStores]:
    """Stores without the pipelined connection: their sink publishes and marks nothing."""
    client: Redis = connect(redis_url, client_name="finish-tests-plain", multiplex=False)
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


async def _finished(
    stores: StateStores,
    flights: list[Flight],
    sink: EventSink,
    fail: int = 0,
    refuse: int = 0,
    waves: int = 1,
) -> CountingStore:
    """Finish `flights` in `waves` parts, each part once the previous one has settled."""
    reporter = EventReporter(sink, interval=0.01)
    counting = CountingStore(stores.requests, fail, refuse)
    deps = SimpleNamespace(
        requests=counting, reporter=reporter, metrics=GatewayMetrics(), limits=None
    )
    finisher = Finisher(cast(GatewayDeps, deps))
    flushing = asyncio.create_task(reporter.run())
    try:
        size = -(-len(flights) // waves)
        for start in range(0, len(flights), size):
            wave = flights[start : start + size]
            await asyncio.gather(*(finisher.finish(f, "ok", None) for f in wave))
            await finisher.settled()
    finally:
        flushing.cancel()
    return counting


async def _all_marked_with_events(stores: StateStores, flights: list[Flight]) -> None:
    assert await stores.requests.inflight() == {}
    for flight in flights:
        assert await stores.requests.status(flight.id) == "ok"
    events = await stores.events.read("recorder", "r", count=1000, block_ms=None)
    assert sorted(e.id for _, e in events) == sorted(f.id for f in flights)


async def _transactions(redis: Redis) -> int:
    stats = await redis.info("commandstats")
    return int(stats.get("cmdstat_exec", {}).get("calls", 0))


async def test_flights_that_end_together_are_marked_with_their_events_in_one_transaction(
    stores: StateStores,
) -> None:
    flights = await _granted_flights(stores)
    before = await _transactions(stores.redis)

    counting = await _finished(stores, flights, stores.completions)

    assert await _transactions(stores.redis) == before + 1
    assert counting.calls == []  # no mark of its own
    await _all_marked_with_events(stores, flights)


async def test_where_the_sink_cannot_mark_they_are_marked_after_their_events_in_one_call(
    plain: StateStores,
) -> None:
    flights = await _granted_flights(plain)

    counting = await _finished(plain, flights, plain.completions)

    assert counting.calls == [N]  # all ended before the first mark: one script call
    await _all_marked_with_events(plain, flights)


async def test_an_outage_delays_the_marks_and_loses_none(stores: StateStores) -> None:
    flights = await _granted_flights(stores)
    sink = FailingSink(stores.completions, fail=2)

    counting = await _finished(stores, flights, sink)

    assert sink.fail == 0 and counting.calls == []  # retried with the events
    await _all_marked_with_events(stores, flights)


async def test_an_outage_of_the_marks_alone_delays_them_and_loses_none(
    plain: StateStores,
) -> None:
    flights = await _granted_flights(plain)

    counting = await _finished(plain, flights, plain.completions, fail=2)

    assert counting.calls == [N, N, N]  # retried with backoff (0.25 s, then 0.5 s)
    await _all_marked_with_events(plain, flights)


async def test_a_refused_mark_is_logged_and_later_ones_are_still_made(
    plain: StateStores, caplog: pytest.LogCaptureFixture
) -> None:
    """A refusal (not an outage) is not retried as it was: the refused requests are marked
    one by one, and the flights that end after it are marked as usual."""
    flights = await _granted_flights(plain)

    counting = await _finished(plain, flights, plain.completions, refuse=1, waves=2)

    assert counting.calls == [N // 2] + [1] * (N // 2) + [N // 2]
    assert "Redis refused to mark 20 requests finished" in caplog.text
    await _all_marked_with_events(plain, flights)


@pytest.mark.parametrize("pipelined", [True, False])
async def test_one_requests_bad_key_does_not_keep_the_others_in_flight(
    stores: StateStores, plain: StateStores, pipelined: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """A request hash of another type makes Redis refuse the whole `finish.lua` call: in the
    transaction and in the finisher's call alike. Each request is then marked alone; only
    the bad one stays in flight, and the log names it."""
    target = stores if pipelined else plain
    flights = await _granted_flights(target)
    bad = flights[7].id
    await target.redis.delete(target.keyspace.request(bad))
    await target.redis.set(target.keyspace.request(bad), "not a hash")

    await _finished(target, flights, target.completions)

    assert set(await target.requests.inflight()) == {bad}
    for flight in flights:
        if flight.id != bad:
            assert await target.requests.status(flight.id) == "ok"
    assert f"Redis refused to mark {bad} finished" in caplog.text


@pytest.mark.parametrize("pipelined", [True, False])
async def test_an_orphan_grant_is_marked_with_or_after_its_event(
    stores: StateStores, plain: StateStores, pipelined: bool
) -> None:
    """A grant nobody waits for is released like any finish: nothing is marked before its
    event is in Redis (the leader's in-flight audit would otherwise end it first)."""
    target = stores if pipelined else plain
    rid = (await _granted_flights(target))[0].id
    reporter = EventReporter(target.completions, interval=3600)  # flushed by hand
    deps = SimpleNamespace(requests=target.requests, reporter=reporter, metrics=None, limits=None)
    finisher = Finisher(cast(GatewayDeps, deps))
    grant = Grant(request_id=rid, worker_id="w1", worker_url="http://w1", granted_at=0.0)

    await finisher.release_orphan(grant)
    await asyncio.sleep(0.05)
    assert rid in await target.requests.inflight()  # not marked: its event is not sent yet

    await reporter.flush()
    await finisher.settled()
    assert rid not in await target.requests.inflight()
    assert await target.requests.status(rid) == "aborted"
    events = await target.events.read("recorder", "r", count=10, block_ms=None)
    assert [(e.id, e.orphan) for _, e in events if isinstance(e, Complete)] == [(rid, True)]


async def test_a_completion_names_the_policy_its_grant_names(stores: StateStores) -> None:
    """The row of a request is labelled with the policy that decided it, carried by its grant
    and its `complete` event; before, the recorder used the policy active when it wrote the
    row (wrong for requests in flight at a switch and for rows written after an outage)."""
    decided, taken = (flight_of({"model": "m", "prompt": p}) for p in "ab")
    for flight in (decided, taken):
        rid = flight.job.id
        await stores.requests.submit(
            envelope(rid, "acme"), request_id=rid, tenant="acme", gateway_id="gw",
            queue_cap=1000, now=0.0,
        )  # fmt: skip
    assert await stores.requests.grant_many(
        [GrantOrder(decided.job.id, "w1", "http://w1")], now=0.0, policy="wfq"
    )
    assert await stores.requests.grant_many([GrantOrder(taken.job.id, "w1", "u")], now=0.0)
    (_, first), (_, second) = await stores.grants.read("gw", "0-0", block_ms=None)
    assert (first.policy, second.policy) == ("wfq", None)
    decided.grant, taken.grant = first, second
    event = decided.completion_event("ok")
    assert event.policy == "wfq" and decode(encode(event)) == event
    assert request_row(event, "vtc").policy == "wfq"  # type: ignore[union-attr]
    assert request_row(taken.completion_event("ok"), "vtc").policy == "vtc"  # type: ignore[union-attr]
