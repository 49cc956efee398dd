"""The leader's in-flight audit: a request that ended in Redis without its completion reaching
the leader gets its slot back — never one still in flight, one whose completion is on its way,
one re-queued, nor one twice. Against a real redis-server, then with a real leading
`SchedulerService`."""

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
from control_plane.state import StateStores
from control_plane.state.inflight_view import NO_ENTRY, InflightView
from control_plane.state.tasks import stop_tasks
from control_plane.state.trimming import parse_id
from tests.support.waiting import until

WORKER = WorkerEntry(id="w1", url="http://w1", model="m", max_num_seqs=4)
NOW = 1_000.0
CONFIRM = 2.0


def _job(rid: str, arrival: float = 10.0) -> Job:
    return Job(id=rid, tenant="a", arrival=arrival, n_in=50, max_tokens=40, model="m")


# -- pure parts ------------------------------------------------------------------------------


def test_a_request_is_due_only_once_confirmed_and_once_the_stream_is_applied_to_its_tail() -> None:
    audit = SlotAudit(None, confirm_s=CONFIRM)  # type: ignore[arg-type]  # no I/O here
    view = InflightView(frozenset({"kept"}), "7-0")

    assert audit.observe(["kept", "gone"], view, parse_id("9-0"), NOW) == []
    assert audit.observe(["kept", "gone"], view, parse_id("9-0"), NOW + 1.9) == []
    # the tail read with the first sighting counts, not a later one
    later = InflightView(frozenset({"kept"}), "12-0")
    assert audit.observe(["kept", "gone"], later, parse_id("6-5"), NOW + 2) == []
    assert audit.observe(["kept", "gone"], later, parse_id("7-0"), NOW + 2) == ["gone"]


def test_a_request_seen_in_flight_again_starts_over() -> None:
    audit = SlotAudit(None, confirm_s=CONFIRM)  # type: ignore[arg-type]
    absent, present = InflightView(frozenset(), "1-0"), InflightView(frozenset({"r"}), "1-0")
    audit.observe(["r"], absent, parse_id("1-0"), NOW)  # its grant not written yet
    audit.observe(["r"], present, parse_id("1-0"), NOW + 1)
    assert audit.observe(["r"], absent, parse_id("1-0"), NOW + 2) == []
    assert audit.observe(["r"], absent, parse_id("1-0"), NOW + 4) == ["r"]
    assert audit.observe([], absent, parse_id("1-0"), NOW + 5) == []  # ended meanwhile


def test_stream_ids_compare_as_numbers() -> None:
    assert newest("9-5", ["10-0", "9-9"]) == "10-0"
    assert newest("10-0", []) == "10-0"
    assert newest(NO_ENTRY, ["1-1", "1-10", "1-2"]) == "1-10"


def _running(n_out: int = 6) -> Running:
    job = _job("r1")
    job.n_out = n_out
    return Running(job, "w1", 0)


def test_the_ending_takes_redis_status_and_the_charged_tokens() -> None:
    record = RequestRecord(id="r1", status="ok", attempts=2, granted_at=11.0, finished_at=15.0)
    event = ending(_running(), record, NOW)
    assert event is not None
    assert (event.status, event.error, event.n_in, event.n_out) == ("ok", LOST_COMPLETION, 50, 6)
    assert (event.arrival, event.dispatched, event.finished) == (10.0, 11.0, 15.0)
    assert (event.worker, event.attempts) == ("w1", 1)
    assert event.sender is not None and event.sender.tenant == "a"


def test_only_a_request_redis_says_ended_is_ended() -> None:
    """Queued (re-queued, its arrival on the way), granted (again), or its hash gone (Redis
    lost data: its worker may still serve it)."""
    assert ending(_running(), None, NOW) is None
    done = ending(_running(), RequestRecord(id="r1", status="aborted"), NOW)
    assert done is not None and (done.finished, done.attempts) == (NOW, 0)
    for status in ("queued", "granted"):
        assert ending(_running(), RequestRecord(id="r1", status=status), NOW) is None


# -- one leader's core against Redis ---------------------------------------------------------


@pytest.fixture
async def stores(redis_url: str) -> AsyncIterator[StateStores]:
    s = StateStores.open(redis_url, "audit")
    await s.events.ensure_groups()
    await s.workers.upsert(WORKER)
    yield s
    await s.aclose()


async def _submit(stores: StateStores, rid: str, arrival: float) -> None:
    job = _job(rid, arrival)
    await stores.requests.submit(
        Envelope(job, {}, "gw"),
        request_id=rid,
        tenant="a",
        gateway_id="gw",
        queue_cap=100,
        now=arrival,
    )


async def _core_running(stores: StateStores, ids: list[str]) -> SchedulerCore:
    for i, rid in enumerate(ids):
        await _submit(stores, rid, float(i))
    core = await rebuild(stores, "fcfs", NOW)
    observe(core, "w1", WorkerSample(True, NOW, models={"m": 4096}))
    decided = core.decide(NOW)
    assert [d.job.id for d in decided] == ids
    for d in decided:
        assert await stores.requests.grant(d.job.id, worker_id="w1", worker_url="u", now=NOW)
    return core


async def _apply_all(stores: StateStores, core: SchedulerCore, applied: str) -> str:
    """What the leader's events loop does: apply what is new; → the last id applied."""
    for entry_id, event in await stores.events.read(GROUP, "s", count=100, block_ms=None):
        apply_event(core, event, NOW)
        applied = newest(applied, [entry_id])
    return applied


async def test_a_completion_never_sent_is_ended_once_and_its_slot_freed(
    stores: StateStores,
) -> None:
    core = await _core_running(stores, ["lost", "served"])
    core.progress("lost", 4, NOW)
    audit = SlotAudit(stores, confirm_s=CONFIRM)
    # "lost": marked finished, its completion dropped; "served": still streaming
    assert await stores.requests.finish_many([("lost", "ok")], now=NOW + 1) == [True]
    applied = await _apply_all(stores, core, NO_ENTRY)

    assert await audit.run(core, applied, NOW + 1) == []  # seen once: not yet
    ended = await audit.run(core, applied, NOW + 1 + CONFIRM)

    assert [(e.id, e.status, e.n_out, e.error) for e in ended] == [
        ("lost", "ok", 4, LOST_COMPLETION)
    ]
    assert "lost" in core.running  # freed when the leader reads its own event back
    applied = await _apply_all(stores, core, applied)
    assert set(core.running) == {"served"}
    assert core.workers["w1"].inflight.keys() == {"served"}
    for later in (2, 3, 6):  # never twice, and the one in flight never
        assert await audit.run(core, applied, NOW + later * CONFIRM) == []
    recorded = await stores.events.read("recorder", "r", count=100, block_ms=None)
    assert [e.id for _, e in recorded if isinstance(e, Complete)] == ["lost"]


async def test_a_completion_in_the_stream_is_left_to_the_leader(stores: StateStores) -> None:
    core = await _core_running(stores, ["r1"])
    audit = SlotAudit(stores, confirm_s=CONFIRM)
    done = Complete("r1", "ok", finished=NOW + 1, n_in=50, n_out=9, arrival=0.0)
    assert await stores.completions.publish([done], [("r1", "ok")], now=NOW + 1)
    applied = NO_ENTRY  # the leader has not read it yet (a slow events loop)

    assert await audit.run(core, applied, NOW + 1) == []
    assert await audit.run(core, applied, NOW + 10 * CONFIRM) == []  # behind: waits

    applied = await _apply_all(stores, core, applied)
    assert core.running == {}
    assert await audit.run(core, applied, NOW + 11 * CONFIRM) == []
    entries = await stores.events.read("recorder", "r", count=100, block_ms=None)
    assert [e.error for _, e in entries if isinstance(e, Complete)] == [None]


async def test_a_request_requeued_or_granted_again_is_left_alone(stores: StateStores) -> None:
    core = await _core_running(stores, ["again"])
    audit = SlotAudit(stores, confirm_s=CONFIRM)
    assert await stores.requests.requeue("again", now=NOW + 1)  # its arrival not read yet
    applied = await _apply_all(stores, core, NO_ENTRY)

    assert await audit.run(core, applied, NOW + 1) == []
    assert await audit.run(core, applied, NOW + 1 + CONFIRM) == []
    assert "again" in core.running

    assert await stores.requests.grant("again", worker_id="w1", worker_url="u", now=NOW + 2)
    assert await audit.run(core, applied, NOW + 2 + 3 * CONFIRM) == []


# -- a leading scheduler ---------------------------------------------------------------------


async def test_a_leader_frees_the_slot_of_a_completion_never_sent(redis_url: str) -> None:
    """The leader adopts three granted requests on takeover. One is then marked finished with
    no completion event (a gateway that could not send it), one ends normally, and the third
    is marked late: its completion went in before the takeover and the previous leader read
    it (its mark had failed, so the rebuild found it in flight). The leader frees the first
    and the third by its audit, the second as usual; the recorder's group sees exactly one
    completion each."""
    settings = Settings(
        redis_url=redis_url, cluster="audit-live", gateway_sweep_interval_s=0.2, lease_ttl_s=2.0
    )
    stores = StateStores.open(redis_url, "audit-live")
    await stores.events.ensure_groups()
    await stores.workers.upsert(WORKER)
    ids = ["dropped", "normal", "consumed"]
    for i, rid in enumerate(ids):
        await _submit(stores, rid, time.time() + i * 1e-3)
        assert await stores.requests.grant(rid, worker_id="w1", worker_url="u", now=time.time())
    await stores.arrivals.ensure_group()
    await stores.arrivals.read_entries("old", count=10, block_ms=None)  # read and acknowledged
    late = Complete("consumed", "ok", finished=time.time(), n_in=50, n_out=2)
    await stores.events.publish([late])
    assert len(await stores.events.read(GROUP, "old", count=10, block_ms=None)) == 1
    await stores.events.ack(GROUP, [await stores.inflight.delivered(GROUP)])
    service = SchedulerService(settings, stores, "sched-a")
    runner = asyncio.create_task(service.run())
    try:
        await until(lambda: service.leading, 5.0)
        assert set(service._core.running) == set(ids)
        done = Complete("normal", "ok", finished=time.time(), n_in=50, n_out=3)
        assert await stores.completions.publish([done], [("normal", "ok")], now=time.time())
        assert await stores.requests.finish_many([("dropped", "error")], now=time.time())
        assert await stores.requests.finish_many([("consumed", "ok")], now=time.time())

        await until(lambda: not service._core.running, 5.0)

        assert not service._core.workers["w1"].inflight
        registry = service.metrics.registry
        assert registry.get_sample_value("arbiter_scheduler_audit_ended_total") == 2
        entries = await stores.events.read("recorder", "r", count=100, block_ms=None)
        ends = [(e.id, e.status, e.error) for _, e in entries if isinstance(e, Complete)]
        assert len(ends) == 4 and set(ends) == {
            ("consumed", "ok", None),
            ("consumed", "ok", LOST_COMPLETION),  # the recorder keeps the first row
            ("dropped", "error", LOST_COMPLETION),
            ("normal", "ok", None),
        }
    finally:
        await stop_tasks([runner])
        await service.http.aclose()
        await stores.aclose()
