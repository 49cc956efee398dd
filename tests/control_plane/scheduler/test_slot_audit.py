"""The leader's in-flight audit: a request that ended in Redis without its completion reaching
the leader gets its slot back — never one still in flight, one whose completion is on its way,
one being granted or re-queued, one Redis lost, nor one twice. Against a real redis-server with
a real core, then with a real leading `SchedulerService`."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from control_plane.contracts.events import Complete
from control_plane.contracts.requests import Envelope, RequestRecord
from control_plane.contracts.workers import WorkerEntry, WorkerSample
from control_plane.core.job import Job
from control_plane.core.scheduler_core import Running, SchedulerCore
from control_plane.scheduler.entries import apply_event
from control_plane.scheduler.rebuild import rebuild
from control_plane.scheduler.service import GROUP, SchedulerService
from control_plane.scheduler.slot_audit import LOST_COMPLETION, SlotAudit, ending, newest
from control_plane.scheduler.workers import observe
from control_plane.settings import Settings
from control_plane.state import StateStores, StateUnavailable
from control_plane.state.inflight_view import NO_ENTRY
from control_plane.state.tasks import stop_tasks
from tests.support.waiting import until

WORKER = WorkerEntry(id="w1", url="http://w1", model="m", max_num_seqs=4)
NOW = 1_000.0


def _job(rid: str, arrival: float = 10.0) -> Job:
    return Job(id=rid, tenant="a", arrival=arrival, n_in=50, max_tokens=40, model="m")


# -- pure parts ------------------------------------------------------------------------------


def test_stream_ids_compare_as_numbers() -> None:
    assert newest("9-5", ["10-0", "9-9"]) == "10-0"
    assert newest("10-0", []) == "10-0"
    assert newest(NO_ENTRY, ["1-1", "1-10", "1-2"]) == "1-10"


def test_the_ending_takes_redis_status_and_the_charged_tokens() -> None:
    job = _job("r1")
    job.n_out = 6
    record = RequestRecord(id="r1", status="ok", attempts=2, granted_at=11.0, finished_at=15.0)
    event = ending(Running(job, "w1", 0), record, NOW)
    assert (event.status, event.error, event.n_in, event.n_out) == ("ok", LOST_COMPLETION, 50, 6)
    assert (event.arrival, event.dispatched, event.finished) == (10.0, 11.0, 15.0)
    assert (event.worker, event.attempts) == ("w1", 1)
    assert event.sender is not None and event.sender.tenant == "a"
    bare = ending(Running(job, "w1", 0), RequestRecord(id="r1", status="aborted"), NOW)
    assert (bare.finished, bare.attempts, bare.dispatched) == (NOW, 0, None)


# -- one leader's core against Redis ---------------------------------------------------------


@pytest.fixture
async def stores(redis_url: str) -> AsyncIterator[StateStores]:
    s = StateStores.open(redis_url, "audit")
    await s.events.ensure_groups()
    await s.workers.upsert(WORKER)
    yield s
    await s.aclose()


async def _submit(stores: StateStores, rid: str, arrival: float) -> None:
    await stores.requests.submit(
        Envelope(_job(rid, arrival), {}, "gw"),
        request_id=rid,
        tenant="a",
        gateway_id="gw",
        queue_cap=100,
        now=arrival,
    )


async def _core_deciding(stores: StateStores, ids: list[str]) -> SchedulerCore:
    """A leader's core that has decided `ids` (running there, not yet granted in Redis)."""
    for i, rid in enumerate(ids):
        await _submit(stores, rid, float(i))
    core = (await rebuild(stores, "fcfs", NOW)).core
    observe(core, "w1", WorkerSample(True, NOW, models={"m": 4096}))
    assert [d.job.id for d in core.decide(NOW)] == ids
    return core


async def _granted(stores: StateStores, ids: list[str]) -> SchedulerCore:
    core = await _core_deciding(stores, ids)
    for rid in ids:
        assert await stores.requests.grant(rid, worker_id="w1", worker_url="u", now=NOW)
    return core


async def _apply_all(stores: StateStores, core: SchedulerCore, applied: str) -> str:
    """What the leader's events loop does: apply what is new; → the last id applied."""
    for entry_id, event in await stores.events.read(GROUP, "s", count=100, block_ms=None):
        apply_event(core, event, NOW)
        applied = newest(applied, [entry_id])
    return applied


async def _recorded(stores: StateStores) -> list[tuple[str, str, str | None]]:
    entries = await stores.events.read("recorder", "r", count=100, block_ms=None)
    return [(e.id, e.status, e.error) for _, e in entries if isinstance(e, Complete)]


async def test_a_completion_never_sent_is_ended_once_and_its_slot_freed(
    stores: StateStores,
) -> None:
    core = await _granted(stores, ["lost", "served"])
    core.progress("lost", 4, NOW)
    applied = await _apply_all(stores, core, NO_ENTRY)
    audit = SlotAudit(stores)
    assert await audit.run(core, applied, NOW) == []  # both in flight
    # "lost": marked finished, its completion dropped; "served": still streaming
    assert await stores.requests.finish_many([("lost", "ok")], now=NOW + 1) == [True]

    assert await audit.run(core, applied, NOW + 1) == []  # sighted: a later pass may end it
    ended = await audit.run(core, applied, NOW + 2)

    assert [(e.id, e.status, e.n_out, e.error) for e in ended] == [
        ("lost", "ok", 4, LOST_COMPLETION)
    ]
    assert "lost" in core.running  # freed when the leader reads its own event back
    assert await audit.run(core, applied, NOW + 3) == []  # not again meanwhile
    applied = await _apply_all(stores, core, applied)
    assert set(core.running) == {"served"}
    assert core.workers["w1"].inflight.keys() == {"served"}
    for later in (4, 5):  # never twice, and the one in flight never
        assert await audit.run(core, applied, NOW + later) == []
    assert await _recorded(stores) == [("lost", "ok", LOST_COMPLETION)]


async def test_a_completion_in_the_stream_is_left_to_the_leader(stores: StateStores) -> None:
    core = await _granted(stores, ["r1"])
    audit = SlotAudit(stores)
    done = Complete("r1", "ok", finished=NOW + 1, n_in=50, n_out=9, arrival=0.0)
    assert await stores.completions.publish([done], [("r1", "ok")], now=NOW + 1)
    applied = NO_ENTRY  # the leader has not read it yet (a slow events loop)

    for later in (1, 2, 20):
        assert await audit.run(core, applied, NOW + later) == []

    applied = await _apply_all(stores, core, applied)
    assert core.running == {}
    assert await audit.run(core, applied, NOW + 21) == []
    assert await _recorded(stores) == [("r1", "ok", None)]


async def test_a_request_being_granted_then_served_quickly_is_left_to_the_leader(
    stores: StateStores,
) -> None:
    """A pass finds it missing while its grant is being written; before the next pass it is
    granted, served and ended, while the leader's events loop lags behind."""
    core = await _core_deciding(stores, ["quick"])
    audit = SlotAudit(stores)
    assert await audit.run(core, NO_ENTRY, NOW) == []  # missing: `queued` in Redis
    assert await stores.requests.grant("quick", worker_id="w1", worker_url="u", now=NOW)
    done = Complete("quick", "ok", finished=NOW + 1, n_in=50, n_out=2, arrival=0.0)
    assert await stores.completions.publish([done], [("quick", "ok")], now=NOW + 1)

    assert await audit.run(core, NO_ENTRY, NOW + 2) == []
    assert await audit.run(core, NO_ENTRY, NOW + 5) == []

    await _apply_all(stores, core, NO_ENTRY)
    assert core.running == {}
    assert await _recorded(stores) == [("quick", "ok", None)]


async def test_a_request_requeued_or_granted_again_is_left_alone(stores: StateStores) -> None:
    core = await _granted(stores, ["again"])
    audit = SlotAudit(stores)
    assert await stores.requests.requeue("again", now=NOW + 1)  # its arrival not read yet
    applied = await _apply_all(stores, core, NO_ENTRY)

    assert await audit.run(core, applied, NOW + 1) == []
    assert await audit.run(core, applied, NOW + 2) == []
    assert "again" in core.running

    assert await stores.requests.grant("again", worker_id="w1", worker_url="u", now=NOW + 2)
    assert await audit.run(core, applied, NOW + 3) == []
    assert await _recorded(stores) == []


async def test_a_request_withdrawn_while_its_grant_is_written_is_left_to_the_refusal(
    stores: StateStores,
) -> None:
    """Its client leaves between the decision and the grant: Redis says `withdrawn` (a final
    status) and the grant will be refused, which takes it out of the core."""
    await _submit(stores, "left", 0.0)
    core = (await rebuild(stores, "fcfs", NOW)).core
    observe(core, "w1", WorkerSample(True, NOW, models={"m": 4096}))
    [decision] = core.decide(NOW)
    assert await stores.requests.withdraw("left", now=NOW, reason="client_disconnected")
    applied = await _apply_all(stores, core, NO_ENTRY)
    audit = SlotAudit(stores)

    assert await audit.run(core, applied, NOW) == []
    assert not await stores.requests.grant("left", worker_id="w1", worker_url="u", now=NOW)
    core.undo(decision)
    assert await audit.run(core, applied, NOW + 1) == []
    assert core.running == {} and await _recorded(stores) == []


async def test_a_request_granted_between_the_two_reads_is_not_sighted(
    stores: StateStores, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Missing from the in-flight read but `granted` in its record: its grant landed in
    between (here: an in-flight read that saw nothing)."""
    core = await _granted(stores, ["r1"])

    async def nothing_in_flight() -> frozenset[str]:
        return frozenset()

    monkeypatch.setattr(stores.inflight, "ids", nothing_in_flight)
    audit = SlotAudit(stores)
    for later in (0, 1, 2):
        assert await audit.run(core, NO_ENTRY, NOW + later) == []
    assert set(core.running) == {"r1"}


async def test_a_failed_pass_is_logged_and_an_outage_is_raised(
    stores: StateStores, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    core = await _granted(stores, ["r1"])
    await stores.redis.hdel(stores.keyspace.inflight, "r1")
    audit = SlotAudit(stores)

    async def refused(ids: list[str]) -> object:
        raise RuntimeError("refused by the test")

    monkeypatch.setattr(stores.inflight, "ended", refused)
    assert await audit.run(core, NO_ENTRY, NOW) == []
    assert "in-flight audit pass failed" in caplog.text

    async def down(ids: list[str]) -> object:
        raise StateUnavailable("Redis is down")

    monkeypatch.setattr(stores.inflight, "ended", down)
    with pytest.raises(StateUnavailable):
        await audit.run(core, NO_ENTRY, NOW + 1)


async def test_a_request_redis_lost_is_left_alone(stores: StateStores) -> None:
    """No hash and not in flight: Redis lost data, its worker may still be serving it."""
    core = await _granted(stores, ["forgotten"])
    await stores.redis.delete(stores.keyspace.request("forgotten"))
    await stores.redis.hdel(stores.keyspace.inflight, "forgotten")

    for later in (0, 1, 5):
        assert await SlotAudit(stores).run(core, NO_ENTRY, NOW + later) == []
    assert "forgotten" in core.running


# -- a leading scheduler ---------------------------------------------------------------------


async def _leading(redis_url: str, cluster: str, ids: list[str]) -> StateStores:
    """Redis as a predecessor left it: `ids` granted on w1."""
    stores = StateStores.open(redis_url, cluster)
    await stores.events.ensure_groups()
    await stores.arrivals.ensure_group()
    await stores.workers.upsert(WORKER)
    for i, rid in enumerate(ids):
        await _submit(stores, rid, time.time() + i * 1e-3)
        assert await stores.requests.grant(rid, worker_id="w1", worker_url="u", now=time.time())
    read = await stores.arrivals.read_after(NO_ENTRY, count=100, block_ms=None)
    await stores.arrivals.mark(read.last_id, None)  # applied by it
    return stores


def _settings(redis_url: str, cluster: str) -> Settings:
    return Settings(
        redis_url=redis_url, cluster=cluster, gateway_sweep_interval_s=0.2, lease_ttl_s=2.0
    )


async def _lead(service: SchedulerService, ids: set[str]) -> asyncio.Task[None]:
    runner = asyncio.create_task(service.run())
    await until(lambda: service.leading, 5.0)
    assert set(service._core.running) == ids
    return runner


async def test_a_leader_frees_the_slot_of_a_completion_never_sent(redis_url: str) -> None:
    """The leader adopts two granted requests on takeover; one is then marked finished with
    no completion event (a gateway that could not send it), the other ends normally. The
    leader frees the first by its audit and counts it, the second as usual; the recorder's
    group sees one completion each."""
    stores = await _leading(redis_url, "audit-live", ["dropped", "normal"])
    service = SchedulerService(_settings(redis_url, "audit-live"), stores, "sched-a")
    runner = await _lead(service, {"dropped", "normal"})
    try:
        done = Complete("normal", "ok", finished=time.time(), n_in=50, n_out=3)
        assert await stores.completions.publish([done], [("normal", "ok")], now=time.time())
        assert await stores.requests.finish_many([("dropped", "error")], now=time.time())

        await until(lambda: not service._core.running, 5.0)

        assert not service._core.workers["w1"].inflight
        registry = service.metrics.registry
        assert registry.get_sample_value("arbiter_scheduler_audit_ended_total") == 1
        assert sorted(await _recorded(stores), key=str) == [
            ("dropped", "error", LOST_COMPLETION),
            ("normal", "ok", None),
        ]
    finally:
        await stop_tasks([runner])
        await service.http.aclose()
        await stores.aclose()


async def test_a_completion_the_predecessor_read_frees_the_slot(redis_url: str) -> None:
    """Its completion went in before the takeover and the previous leader read and
    acknowledged it, but the request's mark had failed, so the rebuild found it in flight;
    the mark goes in later, and nothing else happens on the events stream. The new leader
    counts its group's deliveries as applied, so its audit frees the slot."""
    stores = await _leading(redis_url, "audit-pred", ["late"])
    await stores.events.publish([Complete("late", "ok", finished=time.time(), n_in=50, n_out=2)])
    assert len(await stores.events.read(GROUP, "old", count=10, block_ms=None)) == 1
    await stores.events.ack(GROUP, [await stores.inflight.delivered(GROUP)])
    service = SchedulerService(_settings(redis_url, "audit-pred"), stores, "sched-b")
    runner = await _lead(service, {"late"})
    try:
        await asyncio.sleep(0.5)  # audit passes while it is still in flight
        assert set(service._core.running) == {"late"}
        assert await stores.requests.finish_many([("late", "ok")], now=time.time())

        await until(lambda: not service._core.running, 5.0)

        assert sorted(await _recorded(stores), key=str) == [
            ("late", "ok", LOST_COMPLETION),
            ("late", "ok", None),  # the recorder keeps this one: the first row wins
        ]
    finally:
        await stop_tasks([runner])
        await service.http.aclose()
        await stores.aclose()
