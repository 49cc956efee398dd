"""The leader's sweep of lost gateway replicas: events, core bookkeeping, Redis side together."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from control_plane.contracts.events import Complete
from control_plane.contracts.requests import Envelope, RequestRecord
from control_plane.contracts.workers import WorkerEntry, WorkerSample
from control_plane.core.job import Job, Outcome, Slo
from control_plane.core.ledger import Ledger
from control_plane.core.scheduler_core import SchedulerCore
from control_plane.recorder.rows import request_row
from control_plane.scheduler.rebuild import build_core, rebuild
from control_plane.scheduler.sweeper import (
    GatewaySweeper,
    Release,
    apply_release,
    lost_reason,
    release_event,
)
from control_plane.scheduler.workers import observe, sync_workers
from control_plane.state import StateStores

WORKER = WorkerEntry(id="w1", url="http://w1", model="m", max_num_seqs=2)
NOW = 1_000.0


def _job(rid: str, tenant: str, arrival: float = 10.0) -> Job:
    return Job(
        id=rid,
        tenant=tenant,
        arrival=arrival,
        n_in=50,
        max_tokens=40,
        model="m",
        app="chat",
        slo=Slo(ttft_s=1.0),
    )


def _record(job: Job, status: str, **extra: Any) -> RequestRecord:
    return RequestRecord(
        id=job.id,
        status=status,
        gateway="gw-dead",
        seq=3,
        attempts=1,
        submitted_at=job.arrival,
        envelope=Envelope(job, {}, "gw-dead"),
        **extra,
    )


def _core() -> SchedulerCore:
    core = build_core({}, Ledger(), "fcfs")
    sync_workers(core, [WORKER])
    observe(core, "w1", WorkerSample(True, 0.0, models={"m": 4096}))
    return core


# -- pure parts ------------------------------------------------------------------------------


def test_a_granted_request_becomes_one_aborted_row_with_its_tokens() -> None:
    record = _record(_job("r1", "a"), "granted", worker="w1", granted_at=11.0)

    event = release_event(record, "aborted", n_out=7, now=NOW)
    row = request_row(event, "vtc")

    assert event.error == lost_reason("gw-dead") == "gateway gw-dead lost"
    assert row is not None
    assert (row.id, row.tenant, row.app, row.status) == ("r1", "a", "chat", "aborted")
    assert (row.n_in, row.n_out, row.worker, row.attempts) == (50, 7, "w1", 1)
    assert (row.arrival, row.dispatched_at, row.finished_at) == (10.0, 11.0, NOW)
    assert row.error == "gateway gw-dead lost" and row.slo_violated


def test_a_queued_request_becomes_one_withdrawn_row_without_service() -> None:
    record = _record(_job("r2", "a"), "queued")

    row = request_row(release_event(record, "withdrawn", n_out=7, now=NOW), None)

    assert row is not None
    assert (row.status, row.n_out, row.worker, row.dispatched_at) == ("withdrawn", 0, None, None)


def test_apply_release_frees_the_slot_and_keeps_charged_tokens() -> None:
    core = _core()
    for i in range(3):
        core.arrive(_job(f"j{i}", "a", float(i)), None, float(i))
    assert [d.job.id for d in core.decide(5.0)] == ["j0", "j1"]
    core.progress("j0", 6, 6.0)
    charged = core.ctx.ledger.service(("a",))
    event = release_event(_record(core.running["j0"].job, "granted"), "aborted", n_out=6, now=7.0)

    apply_release(core, Release("j0", "gw-dead", "aborted"), event, 7.0)
    queued = release_event(_record(_job("j2", "a", 2.0), "queued"), "withdrawn", n_out=0, now=7.0)
    apply_release(core, Release("j2", "gw-dead", "withdrawn"), queued, 7.0)

    assert "j0" not in core.running and "j2" not in core.pending
    assert core.workers["w1"].inflight.keys() == {"j1"}
    assert core.ctx.ledger.service(("a",)) == charged  # nothing refunded, nothing extra
    assert core.complete("j0", Outcome("aborted", 50, 6), 8.0) is None  # its event, replayed
    core.arrive(_job("j3", "a", 9.0), None, 9.0)
    assert [d.job.id for d in core.decide(9.0)] == ["j3"]  # the freed slot is used


# -- one pass against Redis ------------------------------------------------------------------


@pytest.fixture
async def stores(redis_url: str) -> AsyncIterator[StateStores]:
    s = StateStores.open(redis_url, "sweep")
    await s.events.ensure_groups()
    await s.workers.upsert(WORKER)
    yield s
    await s.aclose()


async def _submit(stores: StateStores, job: Job, gateway: str) -> None:
    await stores.requests.submit(
        Envelope(job, {}, gateway),
        request_id=job.id,
        tenant=job.tenant,
        gateway_id=gateway,
        queue_cap=100,
        now=job.arrival,
    )


async def _leader_with_two_running(stores: StateStores) -> SchedulerCore:
    await stores.gateways.beat("gw-dead", ttl_s=5, now=NOW)
    await stores.gateways.beat("gw-ok", ttl_s=5, now=NOW)
    for i in range(4):
        await _submit(stores, _job(f"d{i}", "a", float(i)), "gw-dead")
    await _submit(stores, _job("ok0", "b", 9.0), "gw-ok")
    core = (await rebuild(stores, "fcfs", NOW)).core
    observe(core, "w1", WorkerSample(True, NOW, models={"m": 4096}))
    for d in core.decide(NOW):
        assert await stores.requests.grant(d.job.id, worker_id="w1", worker_url="u", now=NOW)
    core.progress("d0", 5, NOW)
    return core


async def test_sweep_releases_a_lost_replicas_requests_and_frees_its_worker(
    stores: StateStores,
) -> None:
    core = await _leader_with_two_running(stores)
    assert set(core.running) == {"d0", "d1"}
    await stores.gateways.leave("gw-dead")
    sweeper = GatewaySweeper(stores, confirm_s=0.0)

    released = await sweeper.sweep(core, NOW + 6)

    assert sorted((r.request_id, r.status) for r in released) == [
        ("d0", "aborted"),
        ("d1", "aborted"),
        ("d2", "withdrawn"),
        ("d3", "withdrawn"),
    ]
    assert core.running == {} and set(core.pending) == {"ok0"}
    assert await stores.requests.queued_ids() == ["ok0"]
    assert await stores.requests.inflight() == {}
    entries = await stores.events.read("recorder", "r", count=100, block_ms=None)
    done = {e.id: e for _, e in entries if isinstance(e, Complete)}
    assert {rid: e.status for rid, e in done.items()} == {
        "d0": "aborted",
        "d1": "aborted",
        "d2": "withdrawn",
        "d3": "withdrawn",
    }
    assert done["d0"].n_out == 5 and done["d1"].n_out == 0
    assert [d.job.id for d in core.decide(NOW + 6)] == ["ok0"]


async def test_a_second_pass_changes_nothing_and_forgets_the_lost_replica(
    stores: StateStores,
) -> None:
    core = await _leader_with_two_running(stores)
    await stores.gateways.leave("gw-dead")
    sweeper = GatewaySweeper(stores, confirm_s=0.0)
    assert len(await sweeper.sweep(core, NOW + 6)) == 4

    assert await sweeper.sweep(core, NOW + 7) == []

    assert set(await stores.gateways.registered()) == {"gw-ok"}
    assert await stores.gateways.lost() == []
    assert await sweeper.sweep(core, NOW + 8) == []


async def test_live_and_never_seen_replicas_are_left_alone(stores: StateStores) -> None:
    core = await _leader_with_two_running(stores)
    await _submit(stores, _job("old", "c", 20.0), "gw-before-heartbeats")
    # a version without heartbeats ran its own submit.lua, which registered no replica
    await stores.redis.zrem(stores.keyspace.gateways, "gw-before-heartbeats")
    core.arrive(_job("old", "c", 20.0), None, NOW)

    assert await GatewaySweeper(stores, confirm_s=0.0).sweep(core, NOW + 6) == []

    assert await stores.requests.queued_ids() == ["d2", "d3", "ok0", "old"]
    assert set(await stores.requests.inflight()) == {"d0", "d1"}
    assert set(core.running) == {"d0", "d1"}


async def test_a_loss_is_acted_on_only_once_confirmed_for_confirm_s(stores: StateStores) -> None:
    core = await _leader_with_two_running(stores)
    await stores.gateways.leave("gw-dead")
    await stores.gateways.leave("gw-ok")  # as after a Redis outage: every liveness key gone
    clock = [100.0]  # the sweeper's monotonic clock
    sweeper = GatewaySweeper(stores, confirm_s=2.0, clock=lambda: clock[0])

    assert await sweeper.sweep(core, NOW) == []  # first seen lost: only noted
    await stores.gateways.beat("gw-ok", ttl_s=5, now=NOW + 1)  # the live one shows up again
    clock[0] = 101.5
    assert await sweeper.sweep(core, NOW + 1.5) == []
    clock[0] = 102.0
    released = await sweeper.sweep(core, NOW + 2.0)

    assert {r.gateway for r in released} == {"gw-dead"} and len(released) == 4
    assert await stores.requests.queued_ids() == ["ok0"]
    await stores.gateways.leave("gw-ok")
    clock[0] = 103.0
    assert await sweeper.sweep(core, NOW + 3.0) == []  # gw-ok's loss starts a fresh count
    assert await stores.requests.queued_ids() == ["ok0"]


async def test_a_step_of_the_wall_clock_does_not_confirm_a_loss(stores: StateStores) -> None:
    """Regression: the confirmation counted on the wall clock, so a forward step of the
    clock (NTP) right after an outage that expired every liveness key released the requests
    of live replicas before they could beat again."""
    core = await _leader_with_two_running(stores)
    await stores.gateways.leave("gw-ok")
    sweeper = GatewaySweeper(stores, confirm_s=2.0, clock=lambda: 100.0)
    assert await sweeper.sweep(core, NOW) == []
    assert await sweeper.sweep(core, NOW + 3600.0) == []  # the wall clock jumped an hour
    assert "ok0" in await stores.requests.queued_ids()


async def _lost_with_nothing_left(stores: StateStores) -> tuple[SchedulerCore, GatewaySweeper]:
    await stores.gateways.beat("gw-dead", ttl_s=5, now=NOW)
    await stores.gateways.leave("gw-dead")
    return _core(), GatewaySweeper(stores, confirm_s=0.0)


async def test_a_request_submitted_between_the_read_and_the_forget_keeps_its_replica(
    stores: StateStores, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: the pass that found nothing of a lost replica forgot it (its grants
    stream deleted) even when the replica, back from a pause, had submitted a request since
    that read: a grant written before the forget was deleted unread, and the request's owner
    was no longer registered, so it was never released if the replica died before beating."""
    core, sweeper = await _lost_with_nothing_left(stores)
    read = stores.requests.owned_by

    async def read_then_the_replica_submits(gateway_ids: Any) -> list[RequestRecord]:
        records = await read(gateway_ids)
        await _submit(stores, _job("late", "a", NOW), "gw-dead")  # before its next beat
        assert await stores.requests.grant("late", worker_id="w1", worker_url="u", now=NOW)
        return records

    monkeypatch.setattr(stores.requests, "owned_by", read_then_the_replica_submits)
    assert await sweeper.sweep(core, NOW + 6) == []
    monkeypatch.undo()

    assert [g.request_id for _, g in await stores.grants.read("gw-dead", "0-0", None)] == [
        "late"
    ]  # its grant is still there to be read
    assert await stores.gateways.lost() == ["gw-dead"]  # still registered: it never beat
    released = await sweeper.sweep(core, NOW + 7)
    assert [(r.request_id, r.status) for r in released] == [("late", "aborted")]
    assert await stores.requests.inflight() == {}


async def test_a_forgotten_replica_that_submits_again_is_released_if_it_never_beats(
    stores: StateStores,
) -> None:
    """Regression: a request submitted by a replica already forgotten, before its next beat,
    had an unregistered owner: never reported lost, it held its place (then a worker slot)
    for good when that replica died before beating."""
    core, sweeper = await _lost_with_nothing_left(stores)
    assert await sweeper.sweep(core, NOW + 6) == []
    assert await stores.gateways.registered() == {}  # forgotten

    await _submit(stores, _job("late", "a", NOW), "gw-dead")
    core.arrive(_job("late", "a", NOW), None, NOW)

    assert await stores.gateways.lost() == ["gw-dead"]
    released = await sweeper.sweep(core, NOW + 7)
    assert [(r.request_id, r.status) for r in released] == [("late", "withdrawn")]
    assert await stores.requests.queued_ids() == []
