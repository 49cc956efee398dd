"""The dispatcher: policy + admission + placement, and the ledger charges."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from control_plane.admission.capacity import CapacityAdmission, CapacityParams
from control_plane.admission.registry import build_admission
from control_plane.core.dispatcher import Dispatcher
from control_plane.core.job import Job, Outcome, Slo
from control_plane.core.ledger import Ledger
from control_plane.core.policy import PolicyContext
from control_plane.core.worker_view import WorkerView
from control_plane.placement.registry import build_placement
from control_plane.policies.registry import build_policy
from tests.control_plane.policies.jobs import job


def worker(id: str, model: str = "m", **fields: object) -> WorkerView:
    base: dict[str, object] = {"id": id, "model": model, "max_num_seqs": 2, "kv_tokens": 1000}
    return WorkerView(**(base | fields))  # type: ignore[arg-type]


def dispatcher(
    policy: str = "fcfs", admission: dict[str, Any] | None = None, hol: bool = True
) -> Dispatcher:
    return Dispatcher(
        build_policy(policy, PolicyContext()),
        build_admission("capacity", admission),
        build_placement("least_loaded"),
        hol_blocking=hol,
    )


def test_only_healthy_undrained_workers_of_the_jobs_model_are_used() -> None:
    d = dispatcher()
    d.push(job("x", model="m"), 0.0)
    workers = [
        worker("sick", healthy=False),
        worker("leaving", draining=True),
        worker("other", model="n"),
    ]
    assert d.next(0.0, workers) is None
    decision = d.next(0.0, [*workers, worker("ok")])
    assert decision is not None and decision.worker.id == "ok" and decision.job.id == "x"
    assert decision.job.worker == "ok" and decision.job.dispatched_at == 0.0


def test_drain_fills_every_pool_and_respects_caps() -> None:
    d = dispatcher()
    for i in range(5):
        d.push(job(f"m{i}", model="m", arrival=float(i)), 0.0)
    d.push(job("n0", model="n", arrival=9.0), 0.0)
    decisions = d.drain(0.0, [worker("w1"), worker("w2"), worker("v", model="n")])
    placed = [(x.job.id, x.worker.id) for x in decisions]
    assert placed == [("m0", "w1"), ("m1", "w2"), ("m2", "w1"), ("m3", "w2"), ("n0", "v")]
    assert len(d.policy) == 1
    assert d.drain(0.0, [worker("w1", inflight=2)]) == []


def test_a_job_that_does_not_fit_holds_its_pool_but_not_the_others() -> None:
    fence = {"token_fence": 1.0}
    for hol, expected in ((True, ["n-small"]), (False, ["m-small", "n-small"])):
        d = dispatcher(admission=fence, hol=hol)
        d.push(job("m-big", model="m", n_in=900, max_tokens=50, arrival=0.0), 0.0)
        d.push(job("m-small", model="m", n_in=10, max_tokens=10, arrival=1.0), 0.0)
        d.push(job("n-small", model="n", n_in=10, max_tokens=10, arrival=2.0), 0.0)
        busy = worker("w", inflight=1, inflight_tokens=500, max_num_seqs=8)
        decisions = d.drain(0.0, [busy, worker("v", model="n")])
        assert [x.job.id for x in decisions] == expected


def test_ledger_is_charged_on_dispatch_tokens_and_finish() -> None:
    d = dispatcher("vtc")
    ledger = d.policy.ctx.ledger
    j = job("x", "t", n_in=10, max_tokens=20, slo=Slo(e2e_s=1.0))
    d.push(j, 0.0)
    decision = d.next(0.0, [worker("w", model="default")])
    assert decision is not None and decision.reserved_tokens == 30
    assert ledger.service(("t",)) == 10.0
    d.on_tokens(j, 5, 0.5)
    assert j.n_out == 5 and ledger.service(("t",)) == 20.0
    d.on_finish(j, Outcome("ok", 10, 8, e2e_s=2.0), 2.0)  # 3 unreported tokens charged
    assert j.n_out == 8 and ledger.service(("t",)) == 26.0
    assert ledger.counter(("t",)) == 26.0
    window = ledger.window(("t", "app", "agent"), 2.0)
    assert (window.completed, window.violations) == (1, 1)


def test_switch_keeps_pending_jobs_and_statera_reserves_its_bound() -> None:
    d = Dispatcher(
        build_policy("fcfs", PolicyContext()),
        build_admission("statera"),
        build_placement("kv_aware"),
    )
    for i in range(3):
        d.push(job(f"j{i}", "t", n_in=100, max_tokens=400), 0.0)
    d.switch(build_policy("exfairs", d.policy.ctx), 1.0)
    assert sorted(j.id for j in d.policy.jobs()) == ["j0", "j1", "j2"]
    decisions = d.drain(1.0, [worker("w", model="default", max_num_seqs=8)])
    assert [x.reserved_tokens for x in decisions] == [500]  # fence 900: one fits after idle


def test_fail_over_restores_the_plug_ins_and_continues_the_order() -> None:
    d = Dispatcher(
        build_policy("vtc", PolicyContext()),
        build_admission("statera"),
        build_placement("round_robin"),
    )
    for i in range(6):
        d.push(job(f"j{i}", f"t{i % 3}", n_in=10 * (i + 1), max_tokens=5), 0.0)
    workers = [worker("a", model="default"), worker("b", model="default")]
    first = d.drain(0.0, workers, limit=2)
    state = json.loads(json.dumps(d.snapshot()))
    ledger = Ledger.from_snapshot(json.loads(json.dumps(d.policy.ctx.ledger.snapshot())))
    standby = Dispatcher(
        build_policy("vtc", PolicyContext(ledger=ledger)),
        build_admission("statera"),
        build_placement("round_robin"),
    )
    standby.restore(state)
    standby.adopt([replace(j) for j in d.policy.jobs()], 1.0)
    loaded = [worker("a", model="default", inflight=1), worker("b", model="default", inflight=1)]
    expected = [(x.job.id, x.worker.id) for x in d.drain(1.0, loaded)]
    assert [(x.job.id, x.worker.id) for x in standby.drain(1.0, loaded)] == expected
    assert len(first) == 2 and len(expected) == 2


class CountingCapacity(CapacityAdmission):
    calls = 0

    def admit(self, job: Job, worker: WorkerView, now: float) -> bool:
        self.calls += 1
        return super().admit(job, worker, now)


def test_when_every_pool_is_held_the_scan_stops_and_the_queue_is_intact() -> None:
    admission = CountingCapacity(CapacityParams(token_fence=1.0))
    d = Dispatcher(build_policy("vtc", PolicyContext()), admission, build_placement("least_loaded"))
    d.push(job("big", "a", model="m", n_in=900, max_tokens=50), 0.0)
    for i in range(50):
        d.push(job(f"small{i}", "b", model="m", n_in=1, max_tokens=1), 0.0)
    busy = worker("w", inflight=1, inflight_tokens=500, max_num_seqs=64)
    assert d.next(0.0, [busy]) is None
    assert admission.calls == 1 and len(d.policy) == 51
    decision = d.next(0.0, [worker("w", max_num_seqs=64)])  # idle worker: the big one goes
    assert decision is not None and decision.job.id == "big"


def _sized(min_context: int | None, id: str = "x", arrival: float = 0.0) -> Job:
    j = job(id, model="m", arrival=arrival)
    j.min_context = min_context
    return j


def test_a_job_that_needs_a_longer_context_goes_only_to_a_worker_that_holds_it() -> None:
    """Workers of one model with different contexts: a request past the shorter one's would
    be refused there, or cut short (before: placement chose by load alone)."""
    short, long = worker("short", max_model_len=4096), worker("long", max_model_len=32768)
    d = dispatcher()
    d.push(_sized(8000), 0.0)
    decision = d.next(0.0, [short, replace(long, inflight=1)])  # the short one is idler
    assert decision is not None and decision.worker.id == "long"

    d.push(_sized(8000, "y"), 0.0)
    assert d.next(0.0, [short, replace(long, inflight=2)]) is None  # it waits for the long one


def test_a_job_that_fits_everywhere_is_not_held_back() -> None:
    short, long = worker("short", max_model_len=4096), worker("long", max_model_len=32768)
    for need in (None, 2000):
        d = dispatcher()
        d.push(_sized(need), 0.0)
        decision = d.next(0.0, [short, replace(long, inflight=1)])
        assert decision is not None and decision.worker.id == "short", need


def test_a_job_past_every_context_goes_to_the_longest() -> None:
    """vLLM refuses `max_tokens` past its context but lowers it to the room a prompt leaves:
    the longest worker serves what a shorter one refuses (before: any worker)."""
    short, long = worker("short", max_model_len=4096), worker("long", max_model_len=32768)
    d = dispatcher()
    d.push(_sized(40_000), 0.0)
    decision = d.next(0.0, [short, replace(long, inflight=1)])
    assert decision is not None and decision.worker.id == "long"


def test_a_job_waiting_for_the_long_worker_does_not_idle_the_short_ones() -> None:
    """Head-of-line blocking holds a pool for its first refused job; one refused only for
    want of a long enough worker leaves the shorter ones serving (before: every job of the
    model waited behind it, short workers idle)."""
    short, long = worker("short", max_model_len=4096), worker("long", max_model_len=32768)
    d = dispatcher()
    d.push(_sized(8000, "big", 0.0), 0.0)
    for i in range(3):
        d.push(_sized(None, f"small{i}", 1.0 + i), 0.0)
    decisions = d.drain(0.0, [short, replace(long, inflight=2)])  # the long one is full
    assert [(x.job.id, x.worker.id) for x in decisions] == [
        ("small0", "short"), ("small1", "short"),
    ]  # fmt: skip
    decisions = d.drain(0.0, [short, long])  # a long slot frees: the big job gets it first
    assert (decisions[0].job.id, decisions[0].worker.id) == ("big", "long")


def test_the_longest_context_counts_only_workers_that_may_serve() -> None:
    """A long worker that is unhealthy or draining holds nothing: a job past every other
    worker's context is not kept waiting for it."""
    short = worker("short", max_model_len=4096)
    for gone in (worker("long", max_model_len=32768, healthy=False),
                 worker("long", max_model_len=32768, draining=True)):  # fmt: skip
        d = dispatcher()
        d.push(_sized(8000), 0.0)
        decision = d.next(0.0, [short, gone])
        assert decision is not None and decision.worker.id == "short"


def test_a_job_that_needs_a_longer_context_waits_for_a_worker_known_to_hold_it() -> None:
    """A worker not scraped yet may be a short one (before: it took the job, to refuse it)."""
    short, long = worker("short", max_model_len=4096), worker("long", max_model_len=32768)
    unknown = worker("new", max_model_len=None)
    d = dispatcher()
    d.push(_sized(8000), 0.0)
    assert d.next(0.0, [short, replace(long, inflight=2), unknown]) is None
    decision = d.next(0.0, [short, long, replace(unknown, inflight=1)])
    assert decision is not None and decision.worker.id == "long"
    d.push(_sized(None, "y"), 0.0)  # no context named (it fits the shortest): any will do
    decision = d.next(0.0, [replace(short, inflight=2), replace(long, inflight=2), unknown])
    assert decision is not None and decision.worker.id == "new"


def test_contexts_unknown_or_equal_change_nothing() -> None:
    for contexts in ((None, None), (4096, 4096), (4096, None)):
        a = worker("a", max_model_len=contexts[0])
        b = worker("b", max_model_len=contexts[1], inflight=1)
        d = dispatcher()
        d.push(_sized(8000), 0.0)
        decision = d.next(0.0, [a, b])
        assert decision is not None and decision.worker.id == "a", contexts
