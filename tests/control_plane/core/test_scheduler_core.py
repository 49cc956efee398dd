"""The live scheduler's core: arrivals, decisions, cumulative charging, completions."""

from __future__ import annotations

from control_plane.contracts.knobs import PluginChoice
from control_plane.contracts.workers import WorkerEntry, WorkerSample
from control_plane.core.job import Job, Outcome, Slo
from control_plane.core.ledger import Ledger
from control_plane.core.scheduler_core import SchedulerCore
from control_plane.policies.registry import build_policy
from control_plane.scheduler.rebuild import build_core
from control_plane.scheduler.workers import observe, sync_workers


def _core(policy: str = "vtc") -> SchedulerCore:
    core = build_core({"policy": PluginChoice(policy)}, Ledger(), "fcfs")
    sync_workers(core, [WorkerEntry(id="w1", url="http://w1", model="m", max_num_seqs=2)])
    observe(core, "w1", WorkerSample(True, 0.0, models={"m": 2048}))
    return core


def _job(i: int, tenant: str, t: float) -> Job:
    return Job(id=f"j{i}", tenant=tenant, arrival=t, n_in=10, max_tokens=20, model="m", seq=i)


def test_respects_capacity_and_frees_on_completion() -> None:
    core = _core()
    for i in range(4):
        core.arrive(_job(i, "a", float(i)), None, float(i))
    first = core.decide(10.0)
    assert [d.job.id for d in first] == ["j0", "j1"]
    assert core.decide(10.0) == []
    core.complete("j0", Outcome("ok", 10, 20), 11.0)
    assert [d.job.id for d in core.decide(11.0)] == ["j2"]


def test_a_worker_registered_again_still_counts_what_runs_on_it() -> None:
    """Removed (not drained) and registered again under the same id while its requests run:
    the new slot holds them, so nothing is granted on top of a full worker."""
    core = _core()
    for i in range(4):
        core.arrive(_job(i, "a", float(i)), None, float(i))
    assert [d.job.id for d in core.decide(10.0)] == ["j0", "j1"]
    entry = WorkerEntry(id="w1", url="http://w1", model="m", max_num_seqs=2)

    sync_workers(core, [])  # removed: its slot is gone, its requests still run
    sync_workers(core, [entry])  # registered again
    observe(core, "w1", WorkerSample(True, 0.0, models={"m": 2048}))

    assert core.decide(11.0) == []  # full: j0 and j1 still hold both seats
    core.complete("j0", Outcome("ok", 10, 20), 12.0)
    assert [d.job.id for d in core.decide(12.0)] == ["j2"]


def test_progress_is_cumulative_and_idempotent() -> None:
    core = _core()
    core.arrive(_job(0, "a", 0.0), None, 0.0)
    core.decide(0.0)
    ledger = core.ctx.ledger
    before = ledger.counter(("a",))
    core.progress("j0", 5, 1.0)
    core.progress("j0", 5, 1.1)  # a repeated event charges nothing
    core.progress("j0", 3, 1.2)  # a stale one neither
    assert core.running["j0"].job.n_out == 5
    assert ledger.counter(("a",)) > before
    core.complete("j0", Outcome("ok", 10, 8), 2.0)
    assert ledger.service(("a",)) == 10 * 1.0 + 8 * 2.0


def test_vtc_serves_the_quiet_tenant_next() -> None:
    core = _core()
    for i in range(6):
        core.arrive(_job(i, "noisy", float(i)), None, float(i))
    core.decide(6.0)
    for rid in ("j0", "j1"):
        core.progress(rid, 20, 7.0)
        core.complete(rid, Outcome("ok", 10, 20), 7.0)
    core.arrive(_job(99, "quiet", 8.0), None, 8.0)
    # lifted to the noisy counter (a tie, broken by arrival), then ahead of noisy's backlog
    nxt = core.decide(8.0)
    assert [d.job.id for d in nxt] == ["j2", "j99"]


def test_withdraw_and_requeue() -> None:
    core = _core("fcfs")
    core.arrive(_job(0, "a", 0.0), None, 0.0)
    core.arrive(_job(1, "a", 1.0), None, 1.0)
    assert core.withdraw("j1") is not None
    assert len(core.decide(2.0)) == 1
    core.arrive(_job(0, "a", 0.0), None, 3.0)  # the worker failed: re-queued
    assert "j0" in core.pending and "j0" not in core.running
    assert core.workers["w1"].inflight == {}


def test_failed_worker_gets_nothing_until_healthy_again() -> None:
    core = _core("fcfs")
    core.worker_failed("w1", 0.0)
    core.arrive(_job(0, "a", 0.0), None, 0.0)
    assert core.decide(1.0) == []
    observe(core, "w1", WorkerSample(True, 2.0))  # healthy, but still cooling down
    assert core.decide(2.0) == []
    observe(core, "w1", WorkerSample(True, 6.0))
    assert len(core.decide(6.0)) == 1


def test_policy_switch_keeps_pending_jobs() -> None:
    core = _core("vtc")
    for i in range(5):
        core.arrive(_job(i, "a" if i % 2 else "b", float(i)), None, float(i))
    core.switch_policy(build_policy("fcfs", core.ctx), 5.0)
    assert core.dispatcher.policy.name == "fcfs"
    assert {d.job.id for d in core.decide(6.0)} == {"j0", "j1"}
    assert set(core.pending) == {"j2", "j3", "j4"}


def test_a_queue_timeout_counts_in_the_fairness_windows_as_a_violation() -> None:
    """A request that timed out in the queue was never served: SAFI's windows (ExFairS's
    `SLO_i`) count it violated, as the report does; before, they never saw it, so a client
    whose requests all timed out looked the best served."""
    core = _core("exfairs")
    for i in range(3):
        core.arrive(Job(f"t{i}", "a", 0.0, 10, 20, model="m", seq=i, slo=Slo(e2e_s=5.0)), None, 0.0)
    for i in range(3):
        assert core.time_out(f"t{i}", 30.0) is not None
    window = core.ctx.ledger.window(("a",), 30.0)
    assert (window.completed, window.violations) == (3.0, 3.0)
    assert core.time_out("t0", 31.0) is None  # gone: counted once
    assert core.ctx.ledger.window(("a",), 31.0).violations == 3.0


def test_a_worker_that_no_longer_serves_its_registered_model_gets_nothing() -> None:
    """Registered for `m`, redeployed serving `other`: every request it got would fail at once
    (404), so it is not healthy while its scrape lists no `m`; it is again once it does."""
    core = _core()
    core.arrive(_job(0, "a", 0.0), None, 0.0)
    observe(core, "w1", WorkerSample(True, 1.0, models={"other": 2048}))
    assert core.decide(1.0) == []
    observe(core, "w1", WorkerSample(True, 2.0, models={"m": 2048}))
    assert [d.job.id for d in core.decide(2.0)] == ["j0"]
