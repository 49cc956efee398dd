"""The reporter's acknowledgements: an event's future resolves only once it is in Redis, and
stays pending through an outage (the finisher marks a request finished only after that); a
completion that carries its request's status is marked with it, through an outage too."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Sequence

import pytest

from control_plane.contracts.events import Complete, Event, Sender, WorkerFailed
from control_plane.core.job import Slo
from control_plane.gateway.reporter import EventReporter
from control_plane.state import GrantOrder, StateStores, StateUnavailable
from tests.support.envelopes import envelope


class Route:
    """Publishes to whichever real event stream is current (Redis down, then up)."""

    def __init__(self, stores: StateStores) -> None:
        self.stores = stores

    async def publish(
        self, events: Sequence[Event], finished: Sequence[tuple[str, str]], *, now: float
    ) -> bool:
        return await self.stores.completions.publish(events, finished, now=now)


async def test_an_ack_resolves_when_its_event_is_in_redis(redis_url: str) -> None:
    stores = StateStores.open(redis_url, "rep")
    try:
        reporter = EventReporter(stores.completions)
        ack = reporter.emit(WorkerFailed("r1", "w1", "boom", 1.0))
        reporter.progress("r2", 5, 1.0)
        assert not ack.done()
        await reporter.flush()
        assert ack.done() and ack.result() is False  # nothing marked: it carried no status
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
        reporter = EventReporter(stores.completions, interval=30.0)
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


async def test_a_completion_with_its_status_is_marked_with_it_after_an_outage(
    redis_url: str,
) -> None:
    down = StateStores.open("redis://127.0.0.1:1/0", "rep-mark")
    up = StateStores.open(redis_url, "rep-mark")
    try:
        result = await up.requests.submit(
            envelope("r1", "acme"), request_id="r1", tenant="acme", gateway_id="gw",
            queue_cap=10, now=1.0,
        )  # fmt: skip
        assert result.accepted
        assert await up.requests.grant_many([GrantOrder("r1", "w1", "http://w1")], now=1.0)
        route = Route(down)
        reporter = EventReporter(route)
        failed = reporter.emit(WorkerFailed("r1", "w1", "boom", 1.0))
        done = reporter.emit(_complete("r1"), finish="error")
        with pytest.raises(StateUnavailable):
            await reporter.flush()
        assert await up.requests.status("r1") == "granted"

        route.stores = up  # Redis is back
        await reporter.flush()
        assert done.result() is True and failed.result() is False
        assert await up.requests.status("r1") == "error"
        assert await up.redis.xlen(up.keyspace.events) == 2
    finally:
        await down.aclose()
        await up.aclose()


def _complete(rid: str) -> Complete:
    sender = Sender(tenant="acme", model="m", slo=Slo())
    return Complete(id=rid, status="error", finished=2.0, n_in=3, n_out=0, sender=sender)


async def test_a_status_that_is_not_final_is_refused_when_emitted(redis_url: str) -> None:
    """Refused at the call, so that a flush (which carries everyone's events) cannot fail on
    it."""
    stores = StateStores.open(redis_url, "rep-bad")
    try:
        reporter = EventReporter(stores.completions)
        with pytest.raises(ValueError, match="final status"):
            reporter.emit(_complete("r1"), finish="done")
        await reporter.flush()
        assert await stores.redis.xlen(stores.keyspace.events) == 0
    finally:
        await stores.aclose()


class Refusing:
    """The real sink, except that a batch holding an event of `refused` ids cannot be sent
    (as an event that cannot be encoded), and neither can such an event alone, in any form;
    after `down_after` single-event publishes, Redis goes down."""

    def __init__(self, stores: StateStores, refused: set[str], down_after: int = 10**6) -> None:
        self.stores, self.refused, self.down_after = stores, refused, down_after
        self.singles = 0

    async def publish(
        self, events: Sequence[Event], finished: Sequence[tuple[str, str]], *, now: float
    ) -> bool:
        if len(events) == 1:
            self.singles += 1
            if self.singles > self.down_after:
                raise StateUnavailable("redis unavailable: test")
        if any(e.id in self.refused for e in events):
            raise TypeError("cannot be encoded (test)")
        return await self.stores.completions.publish(events, finished, now=now)


async def _ids_in(stores: StateStores) -> list[str]:
    entries = await stores.redis.xrange(stores.keyspace.events)
    return [json.loads(fields["data"])["id"] for _, fields in entries]


async def test_an_unencodable_text_is_escaped_and_the_rest_of_its_batch_goes_through(
    redis_url: str,
) -> None:
    """A lone surrogate cannot be sent as UTF-8: the batch is refused, then each event goes
    alone, the bad one with its text escaped; every future resolves, the caller marks."""
    stores = StateStores.open(redis_url, "rep-poison")
    try:
        reporter = EventReporter(stores.completions)
        bad = reporter.emit(
            dataclasses.replace(_complete("r1"), error="upstream said \ud800"), finish="error"
        )
        good = reporter.emit(_complete("r2"), finish="error")
        reporter.progress("r3", 4, 1.0)
        await reporter.flush()
        assert bad.result() is False and good.result() is False  # not marked: callers mark
        assert await _ids_in(stores) == ["r1", "r2", "r3"]
        entries = await stores.redis.xrange(stores.keyspace.events)
        assert json.loads(entries[0][1]["data"])["error"] == "upstream said \\ud800"
        assert reporter.dropped == 0
    finally:
        await stores.aclose()


async def test_an_event_refused_alone_is_dropped_and_the_loop_goes_on(redis_url: str) -> None:
    stores = StateStores.open(redis_url, "rep-drop")
    try:
        dropped: list[Event] = []
        reporter = EventReporter(
            Refusing(stores, {"bad"}), interval=30.0, on_dropped=dropped.append
        )
        loop = asyncio.create_task(reporter.run())
        await asyncio.sleep(0)
        acks = [
            reporter.emit(WorkerFailed("ok1", "w1", "x", 1.0)),
            reporter.emit(_complete("bad"), finish="error"),
            reporter.emit(_complete("ok2"), finish="error"),
        ]
        async with asyncio.timeout(5.0):
            assert await asyncio.gather(*acks) == [False, False, False]
        assert reporter.dropped == 1 and [e.id for e in dropped] == ["bad"]
        assert not loop.done()
        later = reporter.emit(WorkerFailed("ok3", "w1", "x", 2.0))
        async with asyncio.timeout(5.0):
            assert await later is False
        assert await _ids_in(stores) == ["ok1", "ok2", "ok3"]
        loop.cancel()
        await asyncio.gather(loop, return_exceptions=True)
    finally:
        await stores.aclose()


async def test_an_outage_while_sending_one_by_one_keeps_the_rest(redis_url: str) -> None:
    stores = StateStores.open(redis_url, "rep-half")
    try:
        sink = Refusing(stores, {"bad"}, down_after=1)
        reporter = EventReporter(sink)
        first = reporter.emit(WorkerFailed("ok1", "w1", "x", 1.0))
        bad = reporter.emit(_complete("bad"), finish="error")
        last = reporter.emit(_complete("ok2"), finish="error")
        with pytest.raises(StateUnavailable):
            await reporter.flush()
        assert first.result() is False and not bad.done() and not last.done()

        sink.refused, sink.down_after = set(), 10**6  # Redis is back and takes them
        await reporter.flush()
        assert bad.result() is True and last.result() is True  # marked with their events
        assert await _ids_in(stores) == ["ok1", "bad", "ok2"]
        assert reporter.dropped == 0
    finally:
        await stores.aclose()


class UnsendableSenders:
    """The real sink, except that a completion carrying a sender cannot be sent (as if its
    sender could not be encoded); `stall_after` single-event publishes, the next one hangs
    until `go` is set."""

    def __init__(self, stores: StateStores, stall_after: int = 10**6) -> None:
        self.stores, self.stall_after = stores, stall_after
        self.singles = 0
        self.stalled, self.go = asyncio.Event(), asyncio.Event()

    async def publish(
        self, events: Sequence[Event], finished: Sequence[tuple[str, str]], *, now: float
    ) -> bool:
        if len(events) == 1:
            self.singles += 1
            if self.singles > self.stall_after and not self.go.is_set():
                self.stalled.set()
                await self.go.wait()
        if any(isinstance(e, Complete) and e.sender is not None for e in events):
            raise TypeError("cannot be encoded (test)")
        return await self.stores.completions.publish(events, finished, now=now)


def _no_copy(value: object) -> object:
    raise TypeError("no copy of this event can be made (test)")


@pytest.mark.parametrize("copy_fails", [False, True])
async def test_a_completion_that_cannot_be_sent_goes_bare(
    redis_url: str, monkeypatch: pytest.MonkeyPatch, copy_fails: bool
) -> None:
    """The scheduler still learns that the request ended (its slot is freed, its tokens
    charged); the caller marks it. So too when making the escaped copy fails (an event no
    copy can be made of): the flush does not raise, the bare completion goes."""
    if copy_fails:
        monkeypatch.setattr("control_plane.gateway.reporter.encodable", _no_copy)
    stores = StateStores.open(redis_url, f"rep-bare-{copy_fails}")
    try:
        reporter = EventReporter(UnsendableSenders(stores))
        done = reporter.emit(_complete("r1"), finish="error")
        await reporter.flush()
        assert done.result() is False and reporter.dropped == 0
        entries = await stores.redis.xrange(stores.keyspace.events)
        sent = json.loads(entries[0][1]["data"])
        assert [sent["id"], sent["status"], sent["n_in"]] == ["r1", "error", 3]
        assert "tenant" not in sent and "gateway log" in sent["error"]  # no sender on the wire
    finally:
        await stores.aclose()


async def test_a_flush_cancelled_midway_keeps_what_it_had_not_sent(redis_url: str) -> None:
    stores = StateStores.open(redis_url, "rep-cancel")
    try:
        sink = UnsendableSenders(stores, stall_after=1)
        reporter = EventReporter(sink)
        acks = [
            reporter.emit(WorkerFailed("w", "w1", "x", 1.0)),
            reporter.emit(_complete("r1"), finish="error"),
            reporter.emit(_complete("r2"), finish="error"),
        ]
        flushing = asyncio.create_task(reporter.flush())
        async with asyncio.timeout(5.0):
            await sink.stalled.wait()  # "w" sent alone; "r1" on its way
        flushing.cancel()
        with pytest.raises(asyncio.CancelledError):
            await flushing
        assert acks[0].result() is False and not acks[1].done() and not acks[2].done()

        sink.go.set()
        await reporter.flush()  # as the loop's flush on shutdown does
        assert [a.result() for a in acks] == [False, False, False]
        assert await _ids_in(stores) == ["w", "r1", "r2"]
    finally:
        await stores.aclose()


class Down:
    """A sink whose Redis refuses every write (as a full disk's MISCONF does)."""

    def __init__(self) -> None:
        self.calls = 0
        self.thrice = asyncio.Event()

    async def publish(
        self, events: Sequence[Event], finished: Sequence[tuple[str, str]], *, now: float
    ) -> bool:
        self.calls += 1
        if self.calls >= 3:
            self.thrice.set()
        raise StateUnavailable("redis refused the events: MISCONF (test)")


async def test_events_that_wait_are_reported_now_and_then(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Readiness does not show Redis refusing only writes: the loop says so, but not on every
    retry."""
    sink = Down()
    reporter = EventReporter(sink, interval=0.01)
    loop = asyncio.create_task(reporter.run())
    ack = reporter.emit(WorkerFailed("r1", "w1", "x", 1.0))
    async with asyncio.timeout(5.0):
        await sink.thrice.wait()  # three tries, 50 ms apart: far within COMPLAIN_EVERY_S
    loop.cancel()
    await asyncio.gather(loop, return_exceptions=True)
    waiting = [r for r in caplog.records if "events wait for Redis" in r.getMessage()]
    assert len(waiting) == 1
    assert "1 events wait for Redis: redis refused the events: MISCONF" in waiting[0].getMessage()
    assert not ack.done()


async def test_the_loop_outlives_a_flush_that_fails_unexpectedly(
    redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A bug in one flush is logged; the gateway's accounting does not stop for good."""
    stores = StateStores.open(redis_url, "rep-bug")
    try:
        reporter = EventReporter(stores.completions, interval=0.01)
        real_flush, failures = reporter.flush, [RuntimeError("a bug (test)")]

        async def flush_once_broken() -> None:
            if failures:
                raise failures.pop()
            await real_flush()

        reporter.flush = flush_once_broken  # type: ignore[method-assign]
        loop = asyncio.create_task(reporter.run())
        ack = reporter.emit(WorkerFailed("r1", "w1", "x", 1.0))
        async with asyncio.timeout(5.0):
            assert await ack is False  # sent by a later flush
        assert not loop.done() and not failures
        assert any("flush failed" in r.getMessage() for r in caplog.records)
        loop.cancel()
        await asyncio.gather(loop, return_exceptions=True)
    finally:
        await stores.aclose()
