"""Execution limits: the caps the controller tunes, enforced by the dispatcher on both clocks."""

from __future__ import annotations

from control_plane.contracts.knobs import PluginChoice
from control_plane.contracts.workers import WorkerEntry, WorkerSample
from control_plane.core.job import Job, Outcome
from control_plane.core.ledger import Ledger
from control_plane.core.limits import ExecutionLimits
from control_plane.core.scheduler_core import SchedulerCore
from control_plane.core.worker_view import WorkerView
from control_plane.scheduler.rebuild import build_core
from control_plane.scheduler.workers import observe, sync_workers
from tests.control_plane.policies.jobs import job


def view(**kw: int) -> WorkerView:
    return WorkerView(id="w", model="default", max_num_seqs=64, kv_tokens=10_000, **kw)


def test_no_cap_set_means_off_and_everything_passes() -> None:
    limits = ExecutionLimits()
    assert limits.off
    busy = view(inflight=60, inflight_tokens=9_999, prefilling=5, prefill_tokens=50_000)
    assert limits.has_room(busy) and limits.admit(job("a", n_in=8000), busy, 9000)


def test_the_prefill_cap_refuses_a_prompt_that_would_overflow_it() -> None:
    limits = ExecutionLimits(prefill_tokens=4096)
    prefilling = view(inflight=3, inflight_tokens=3000, prefilling=1, prefill_tokens=3000)
    assert not limits.admit(job("long", n_in=2000), prefilling, 2100)
    assert limits.admit(job("short", n_in=1000), prefilling, 1100)
    decoding = view(inflight=3, inflight_tokens=3000)  # in flight, but past their prefill
    assert limits.admit(job("huge", n_in=9000), decoding, 9100)


def test_an_idle_worker_always_admits_whatever_the_caps() -> None:
    limits = ExecutionLimits(prefill_tokens=100, n_run=1, token_budget=0.1)
    idle = view()
    assert limits.has_room(idle) and limits.admit(job("huge", n_in=50_000), idle, 50_100)


def test_concurrency_and_token_budget_caps() -> None:
    limits = ExecutionLimits(n_run=2, token_budget=0.5)
    assert not limits.has_room(view(inflight=2, inflight_tokens=10))
    assert not limits.has_room(view(inflight=1, inflight_tokens=5_000))
    one = view(inflight=1, inflight_tokens=4_000)
    assert limits.admit(job("fits", n_in=10), one, 1_000)
    assert not limits.admit(job("over", n_in=10), one, 1_001)


def test_limits_round_trip_and_bad_fields_mean_uncapped() -> None:
    limits = ExecutionLimits(prefill_tokens=2048, n_run=8, token_budget=0.75)
    assert ExecutionLimits.from_json(limits.to_json()) == limits
    bad = {"prefill_tokens": -1, "n_run": "8", "token_budget": None}
    assert ExecutionLimits.from_json(bad).off and ExecutionLimits.from_json([1]).off


def core(workers: int = 1) -> SchedulerCore:
    c = build_core({"policy": PluginChoice("fcfs")}, Ledger(), "fcfs")
    entries = [
        WorkerEntry(id=f"w{i}", url=f"http://w{i}", model="m", max_num_seqs=16)
        for i in range(workers)
    ]
    sync_workers(c, entries)
    for e in entries:
        observe(c, e.id, WorkerSample(True, 0.0, models={"m": 1_000_000}))
    return c


def long_job(i: int, n_in: int = 3000) -> Job:
    return Job(id=f"j{i}", tenant="t", arrival=float(i), n_in=n_in, max_tokens=50, model="m", seq=i)


def test_the_core_tracks_prefill_until_the_first_token_and_the_cap_holds_dispatch() -> None:
    c = core()
    c.dispatcher.limits = ExecutionLimits(prefill_tokens=4000)
    for i in range(3):
        c.arrive(long_job(i), None, 0.0)
    assert [d.job.id for d in c.decide(0.0)] == ["j0"]  # j1 would put 6000 tokens in prefill
    slot = c.workers["w0"]
    assert slot.view().prefilling == 1 and slot.view().prefill_tokens == 3000
    c.progress_batch([("j0", 1)], 0.5)  # j0's first token: its prefill is over
    assert slot.view().prefill_tokens == 0
    assert [d.job.id for d in c.decide(0.5)] == ["j1"]
    c.complete("j1", Outcome("ok", 3000, 50), 1.0)  # an end clears a prefill too
    assert slot.view().prefill_tokens == 0 and slot.view().inflight == 1
    assert [d.job.id for d in c.decide(1.0)] == ["j2"]


def test_a_refused_prefill_goes_to_the_worker_without_one_in_the_same_cycle() -> None:
    c = core(workers=2)
    c.dispatcher.limits = ExecutionLimits(prefill_tokens=4000)
    for i in range(3):
        c.arrive(long_job(i), None, 0.0)
    decisions = c.decide(0.0)
    assert sorted(d.worker.id for d in decisions) == ["w0", "w1"]  # one prefill per worker


def test_detaching_the_controller_lifts_the_limits() -> None:
    c = core()
    c.dispatcher.limits = ExecutionLimits(n_run=1)
    c.detach_controller()
    assert c.dispatcher.limits.off and c.controller is None
