"""A submit that failed without an answer, against a real redis-server and the real scripts:
a fast-lane slot it took is released with its `complete` event, a request it queued is
withdrawn, a call that never ran can never take effect later, and an outage only delays this.

Before `abandon`, a take whose reply was lost held its worker's slot for as long as its gateway
lived: no grant message tells a gateway of a take, so nothing ever ended it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any, cast

import pytest
from redis.asyncio import Redis

from control_plane.contracts.events import Complete, Withdrawn
from control_plane.contracts.requests import Envelope
from control_plane.gateway.abandon import SubmitAbandoner
from control_plane.gateway.deps import GatewayDeps
from control_plane.gateway.finish import Finisher
from control_plane.gateway.flight import Flight
from control_plane.gateway.grants import GrantWaiter
from control_plane.gateway.heartbeat import Liveness
from control_plane.gateway.knobs import GatewayKnobs
from control_plane.gateway.metrics import GatewayMetrics
from control_plane.gateway.reporter import EventReporter
from control_plane.gateway.submit import submit_flight
from control_plane.recorder.rows import request_row, withdrawal_row
from control_plane.settings import Settings
from control_plane.state import KeySpace, StateStores, StateUnavailable, connect
from control_plane.state.fast_lane import Loan
from tests.control_plane.gateway.test_door import flight_of

NOW = 1_700_000_000.0
GATEWAY = "gw"


class SubmitThenFail:
    """The real request store, except that `submit` raises as a read timeout does: after the
    real script ran (`ran`), or before it was sent. `abandon` fails its first `down` calls as an
    unreachable Redis would."""

    def __init__(self, store: Any, ran: bool, down: int = 0) -> None:
        self._store = store
        self.ran = ran
        self.down = down
        self.abandon_calls = 0

    async def submit(self, *args: Any, **kwargs: Any) -> None:
        if self.ran:
            await self._store.submit(*args, **kwargs)
        raise StateUnavailable("Timeout reading from the socket")

    async def abandon(self, *args: Any, **kwargs: Any) -> Any:
        self.abandon_calls += 1
        if self.down:
            self.down -= 1
            raise StateUnavailable("Redis is down")
        return await self._store.abandon(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def gateway_deps(store: Any, reporter: EventReporter, **extra: Any) -> GatewayDeps:
    """What a gateway's finishing and submitting read of its dependencies, over `store`."""
    deps = SimpleNamespace(
        settings=Settings(),
        knobs=GatewayKnobs(),
        requests=store,
        reporter=reporter,
        metrics=GatewayMetrics(),
        limits=None,
        gateway_id=GATEWAY,
        liveness=Liveness(5.0),
    )
    for name, value in extra.items():
        setattr(deps, name, value)
    return cast(GatewayDeps, deps)


@pytest.fixture
async def stores(redis_url: str) -> AsyncIterator[StateStores]:
    client: Redis = connect(redis_url, client_name="abandon-tests")
    yield StateStores.build(client, KeySpace("abandon"))
    await client.aclose()


async def _lend(stores: StateStores, slots: int) -> None:
    assert await stores.lease.acquire("s1", 30.0, NOW, fresh=True)
    token = stores.lease.token
    assert token is not None
    await stores.lending.lend("m", [Loan("w1", "http://w1", slots)], fencing_token=token, seq=1)


async def _failed_submit(
    stores: StateStores,
    ran: bool,
    down: int = 0,
    delays: tuple[float, float] = (0.25, 5.0),
) -> tuple[Flight, SubmitThenFail]:
    """Submit one flight through `submit_flight` with a store that fails the call, and wait
    until its abandonment (and what that started) has settled."""
    flight = flight_of({"model": "m", "prompt": "hello"})
    store = SubmitThenFail(stores.requests, ran, down)
    reporter = EventReporter(stores.completions, interval=0.01)
    deps = gateway_deps(store, reporter)
    finisher = Finisher(deps)
    abandoner = SubmitAbandoner(
        cast(Any, store), GATEWAY, finisher.release_unsent, finisher.release_orphan, delays=delays
    )
    waiter = GrantWaiter(stores.grants, GATEWAY, abandoner.release_unwaited)
    flushing = asyncio.create_task(reporter.run())
    try:
        with pytest.raises(StateUnavailable):
            await submit_flight(deps, waiter, flight, abandoner.abandon)
        await abandoner.settled()
        await finisher.settled()
    finally:
        flushing.cancel()
        await asyncio.gather(flushing, return_exceptions=True)
    return flight, store


async def _events(stores: StateStores) -> list[Any]:
    return [e for _, e in await stores.events.read("recorder", "r", count=100, block_ms=None)]


async def test_a_slot_taken_by_a_submit_whose_answer_was_lost_is_released(
    stores: StateStores,
) -> None:
    await _lend(stores, 1)

    flight, _ = await _failed_submit(stores, ran=True)

    assert await stores.requests.status(flight.id) == "error"
    assert await stores.requests.inflight() == {}  # the slot is the worker's again
    events = [e for e in await _events(stores) if isinstance(e, Complete)]
    assert [(e.id, e.status, e.error, e.worker) for e in events] == [
        (flight.id, "error", "submit_failed", "w1")
    ]
    # the recorder writes its row from the event alone, as for a submit that had queued
    # (regression: the slot was released as an orphan grant, which makes no row)
    row = request_row(events[0], "vtc")
    assert row is not None and (row.status, row.error) == ("error", "submit_failed")
    assert (row.tenant, row.worker, row.dispatched_at, row.unified_cost) == (
        flight.job.tenant, "w1", None, 0.0,
    )  # fmt: skip
    assert (row.n_in, row.arrival, row.attempts) == (flight.job.n_in, flight.job.arrival, 1)


async def test_a_request_queued_by_a_submit_whose_answer_was_lost_is_withdrawn(
    stores: StateStores,
) -> None:
    flight, _ = await _failed_submit(stores, ran=True)  # nothing lent: the script queued it

    record = await stores.requests.get(flight.id)
    assert record is not None and (record.status, record.reason) == ("withdrawn", "submit_failed")
    assert await stores.requests.queued_ids() == []
    (event,) = [e for e in await _events(stores) if isinstance(e, Withdrawn)]
    assert event.id == flight.id and event.envelope == flight.envelope
    # the recorder writes its row from the event alone: its client had a 503
    row = withdrawal_row(event, "vtc")
    assert row is not None and (row.status, row.error) == ("error", "submit_failed")
    assert (row.tenant, row.dispatched_at, row.unified_cost) == (flight.job.tenant, None, 0.0)


async def _until(check: Any, timeout_s: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.01)


@pytest.mark.parametrize("grant_read", ["before-the-abandon", "after-the-abandon"])
async def test_a_request_the_leader_granted_before_its_abandon_is_released_with_its_row(
    stores: StateStores, grant_read: str
) -> None:
    """Regression: the grant reader released it as an orphan grant, which makes no row."""
    flight = flight_of({"model": "m", "prompt": "hello"})
    store = SubmitThenFail(stores.requests, ran=True, down=10**9 if grant_read[0] == "b" else 1)
    reporter = EventReporter(stores.completions, interval=0.01)
    deps = gateway_deps(store, reporter)
    finisher = Finisher(deps)
    abandoner = SubmitAbandoner(
        cast(Any, store),
        GATEWAY,
        finisher.release_unsent,
        finisher.release_orphan,
        delays=(0.01, 0.01) if grant_read[0] == "b" else (0.3, 0.3),
    )
    waiter = GrantWaiter(stores.grants, GATEWAY, abandoner.release_unwaited)
    flushing = asyncio.create_task(reporter.run())
    reading: asyncio.Task[None] | None = None
    try:
        with pytest.raises(StateUnavailable):
            await submit_flight(deps, waiter, flight, abandoner.abandon)
        assert await stores.requests.grant(
            flight.id, worker_id="w1", worker_url="http://w1", now=NOW
        )  # the leader, while the abandon waits for Redis (its first call failed)
        if grant_read[0] == "b":
            reading = asyncio.create_task(waiter.run())
            await _until(lambda: _status_is(stores, flight.id, "error"))
            store.down = 0
        await abandoner.settled()
        if reading is None:
            reading = asyncio.create_task(waiter.run())
            await _until(lambda: _status_is(stores, flight.id, "error"))
        await finisher.settled()
    finally:
        for task in (flushing, reading):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

    assert await stores.requests.inflight() == {}
    events = await _events(stores)
    assert [(type(e), e.id, e.status, e.error, e.worker) for e in events] == [
        (Complete, flight.id, "error", "submit_failed", "w1")
    ]
    row = request_row(events[0], "vtc")
    assert row is not None and (row.status, row.error) == ("error", "submit_failed")
    assert (row.tenant, row.n_in, row.dispatched_at) == (flight.job.tenant, flight.job.n_in, None)


async def _status_is(stores: StateStores, request_id: str, status: str) -> bool:
    return await stores.requests.status(request_id) == status


async def test_a_submit_that_runs_after_it_was_abandoned_takes_nothing(
    stores: StateStores,
) -> None:
    await _lend(stores, 1)

    flight, store = await _failed_submit(stores, ran=False)
    assert flight.envelope is not None
    late = await stores.requests.submit(  # the call Redis still held runs now
        flight.envelope, request_id=flight.id, tenant=flight.job.tenant, gateway_id=GATEWAY,
        queue_cap=1000, now=NOW, fast=True,
    )  # fmt: skip

    assert late.duplicate and late.grant is None
    assert await stores.lending.lent() == {"m": {"w1": 1}}  # the slot is still lent
    assert await stores.requests.inflight() == {} and await stores.requests.queued_ids() == []
    assert await _events(stores) == []
    assert store.abandon_calls == 1


async def test_an_outage_delays_the_abandon_and_loses_none(stores: StateStores) -> None:
    await _lend(stores, 1)

    flight, store = await _failed_submit(stores, ran=True, down=2)

    assert store.abandon_calls == 3  # retried with backoff (0.25 s, then 0.5 s)
    assert await stores.requests.status(flight.id) == "error"
    assert await stores.requests.inflight() == {}


async def test_a_long_outage_never_makes_the_abandon_give_up(stores: StateStores) -> None:
    """Regression: after 60 s of retries the failed submit was dropped, and a take that ran
    late in Redis then held its worker's slot for as long as the gateway lived."""
    await _lend(stores, 1)

    flight, store = await _failed_submit(stores, ran=True, down=40, delays=(0.001, 0.004))

    assert store.abandon_calls == 41
    assert await stores.requests.status(flight.id) == "error"
    assert await stores.requests.inflight() == {}


class AwayThenBack:
    """A request store whose `abandon` fails while `away` (only the queue's policy is tested
    here; the scripts are tested above on the real Redis)."""

    def __init__(self) -> None:
        self.away = True
        self.abandoned: list[str] = []

    async def abandon(self, request_id: str, **_: Any) -> Any:
        if self.away:
            raise StateUnavailable("Redis is down")
        self.abandoned.append(request_id)
        return SimpleNamespace(outcome="absent", grant=None)


async def test_beyond_the_cap_the_oldest_failed_submit_is_dropped_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = AwayThenBack()

    async def release(*_: Any) -> None:
        raise AssertionError("nothing to release")

    abandoner = SubmitAbandoner(
        cast(Any, store), GATEWAY, release, release, delays=(0.001, 0.002), max_pending=2
    )
    envelope = cast(Envelope, None)  # this store never reads it
    for request_id in ("a", "b", "c"):
        abandoner.abandon(request_id, envelope)
        await asyncio.sleep(0.01)
    store.away = False
    await abandoner.settled()

    assert store.abandoned == ["b", "c"]
    assert "2 failed submits wait for Redis: a dropped unabandoned" in caplog.text
