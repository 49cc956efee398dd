"""Policy + admission + placement, composed once for the live scheduler and the simulator.

The dispatcher is also the single place that charges the ledger, so service and SLO windows
are recorded the same way whatever policy is active and whichever clock drives it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from control_plane.core.admission import Admission
from control_plane.core.job import Job, Outcome
from control_plane.core.ledger import OutputCharge
from control_plane.core.lengths import LengthPredictor
from control_plane.core.limits import ExecutionLimits
from control_plane.core.placement import Placement
from control_plane.core.policy import Policy, StopPop, TokenReport, switch_policy
from control_plane.core.worker_view import WorkerView


class PoolGate:
    """The `admit` of one decision: some worker of the job's pool (its model's) admits it.

    With `hol_blocking`, the first refused job of a pool holds that pool for the rest of the
    decision, and once every pool is held `StopPop` ends the scan — except a job refused for
    want of a worker whose context holds it (`within_context`): the workers that could hold it
    are kept for it, and the shorter ones serve on. `refuses(model)` names the pools without
    room and the held ones, whose jobs `__call__` refuses without side effects; policies use it
    to skip them (`policies.base.refusals`).
    """

    __slots__ = ("_held", "_hol", "_longest", "_now", "_pools", "admit")

    def __init__(
        self,
        admission: Admission,
        pools: dict[str, list[WorkerView]],
        now: float,
        hol_blocking: bool,
        limits: ExecutionLimits | None = None,
        placement: Placement | None = None,
        longest: dict[str, int] | None = None,
    ) -> None:
        self.admit = admitter(admission, limits, placement)
        """Admission and the execution limits together, for one (job, worker) pair."""
        if longest:
            self.admit = within_context(self.admit, longest)
        self._longest = longest or {}
        self._pools = pools
        self._now = now
        self._hol = hol_blocking
        self._held: set[str] = set()

    def refuses(self, model: str) -> bool:
        return model in self._held or model not in self._pools

    def __call__(self, job: Job) -> bool:
        if job.model in self._held or job.model not in self._pools:
            return False
        admit, now = self.admit, self._now
        if any(admit(job, w, now) for w in self._pools[job.model]):
            return True
        if self._hol and not self._keep_for(job):
            self._held.add(job.model)
            if len(self._held) == len(self._pools):
                raise StopPop  # every pool is held: scanning further cannot succeed
        return False

    def _keep_for(self, job: Job) -> bool:
        """For a job only longer contexts hold: leave its pool the workers too short for it
        (holding them would gain it nothing); False when none is left."""
        reach = _reach(job, self._longest)
        if reach is None:
            return False
        rest = [w for w in self._pools[job.model] if _short(w, reach)]
        if not rest:
            return False
        self._pools[job.model] = rest
        return True


def admitter(
    admission: Admission, limits: ExecutionLimits | None, placement: Placement | None = None
) -> Callable[[Job, WorkerView, float], bool]:
    """`admission.admit`, and the execution limits when any is set, and the placement's
    `fits` when it vetoes workers."""
    admit = admission.admit
    if limits is not None and not limits.off:
        reserve, within, admission_admit = admission.reserve, limits.admit, admit

        def both(job: Job, worker: WorkerView, now: float) -> bool:
            return within(job, worker, reserve(job)) and admission_admit(job, worker, now)

        admit = both
    if placement is None or not placement.vetoes:
        return admit
    fits, admitted = placement.fits, admit

    def vetted(job: Job, worker: WorkerView, now: float) -> bool:
        return admitted(job, worker, now) and fits(job, worker, now)

    return vetted


def within_context(
    admit: Callable[[Job, WorkerView, float], bool], longest: dict[str, int]
) -> Callable[[Job, WorkerView, float], bool]:
    """`admit`, refusing a worker whose context is shorter than the job's `min_context`, or
    than the longest of its model when the job needs more (`longest`: model → the longest
    context among its healthy workers, for models whose contexts differ), or not known yet
    (a worker not scraped yet may be a short one: such a job waits for one known to hold it)."""

    def fits(job: Job, worker: WorkerView, now: float) -> bool:
        reach = _reach(job, longest)
        if reach is not None and _short(worker, reach):
            return False
        return admit(job, worker, now)

    return fits


def _reach(job: Job, longest: dict[str, int]) -> int | None:
    """The context a worker must hold to take `job`: its `min_context`, or the longest its
    model has when it needs more (the one that serves it, lowering `max_tokens` to its room,
    where a shorter one refuses); None when it fits every worker or no context differs."""
    need, most = job.min_context, longest.get(job.model)
    if need is None or most is None:
        return None
    return min(need, most)


def _short(worker: WorkerView, reach: int) -> bool:
    held = worker.max_model_len
    return held is None or held < reach


def longest_contexts(workers: Sequence[WorkerView]) -> dict[str, int]:
    """Model → the longest context its healthy, active workers report, for the models whose
    workers' contexts differ (empty when none do: nothing to filter)."""
    spans: dict[str, tuple[int, int]] = {}
    for w in workers:
        held = w.max_model_len
        if held is None or not w.healthy or w.draining:
            continue
        low, high = spans.get(w.model, (held, held))
        spans[w.model] = (min(low, held), max(high, held))
    return {model: high for model, (low, high) in spans.items() if low < high}


@dataclass(frozen=True, slots=True)
class Decision:
    """Start `job` on `worker`, reserving `reserved_tokens` of its KV cache."""

    job: Job
    worker: WorkerView
    reserved_tokens: int


class Dispatcher:
    """Chooses the next (job, worker) pair and keeps policy, plug-ins and ledger informed.

    `next` asks the policy for its best job that some eligible worker admits, then lets
    placement pick among the admitting workers. Workers are eligible when healthy, not
    draining and serving the job's model; the eligible workers with room form the job's pool.

    With `hol_blocking` (the default), the first job in policy order that its pool has room
    for but cannot fit (a KV fence refuses it) holds that pool for this decision: later jobs
    of the same model do not overtake it. This is VTC's "stop when the chosen request does not
    fit", per pool; without it a stream of small requests can starve a large one forever and
    the counter policies lose their service-gap bound. Pools of other models go on.
    Guarantee: the returned worker admits the returned job, and a decision is returned
    whenever some pool's first fitting-or-blocking job fits (work conservation across pools).
    Every job is given its predicted output length (`lengths`) before any plug-in sees it.
    """

    def __init__(
        self,
        policy: Policy,
        admission: Admission,
        placement: Placement,
        *,
        hol_blocking: bool = True,
        lengths: LengthPredictor | None = None,
    ) -> None:
        self.policy = policy
        self.admission = admission
        self.placement = placement
        self.hol_blocking = hol_blocking
        self.lengths = lengths or LengthPredictor()
        self.limits = ExecutionLimits()
        """Per-worker caps the meta-controller's execution loop tunes (none by default)."""

    @property
    def placement(self) -> Placement:
        """Swappable at run time; each one is bound to the policy context as it joins."""
        return self._placement

    @placement.setter
    def placement(self, placement: Placement) -> None:
        placement.bind(self.policy.ctx)
        self._placement = placement

    # -- queue ------------------------------------------------------------------------------
    def push(self, job: Job, now: float) -> None:
        self.lengths.label(job)
        job.workflow_start = self.policy.ctx.workflows.on_arrival(job, now)
        self.policy.push(job, now)

    def remove(self, job_id: str) -> Job | None:
        job = self.policy.remove(job_id)
        if job is not None:
            self.policy.ctx.workflows.on_withdrawn(job)
        return job

    def switch(self, policy: Policy, now: float) -> None:
        """Zero-downtime switch: `policy` adopts every pending job (same ledger expected)."""
        self.policy = switch_policy(self.policy, policy, now)

    def adopt(self, jobs: Iterable[Job], now: float) -> None:
        """Hand queued jobs over at once (fail-over: after `restore`, instead of `push`).

        Unlike one `push` per job, this keeps the virtual counters of clients the ledger still
        marks as backlogged, so a new leader continues the old one's order.
        """
        jobs = list(jobs)
        for job in jobs:
            self.lengths.label(job)
        self.policy.adopt(jobs, now)

    def snapshot(self) -> dict[str, Any]:
        """Policy, admission and placement state as JSON (the ledger is checkpointed apart)."""
        return {
            "policy": self.policy.snapshot(),
            "admission": self.admission.snapshot(),
            "placement": self.placement.snapshot(),
            "lengths": self.lengths.snapshot(),
            "latency": self.policy.ctx.latency.snapshot(),
            "workflows": self.policy.ctx.workflows.snapshot(),
        }

    def restore(self, snapshot: dict[str, Any]) -> None:
        """Reload `snapshot()` into plug-ins of the same names; then `adopt` the queue."""
        self.policy.restore(snapshot["policy"])
        self.admission.restore(snapshot["admission"])
        self.placement.restore(snapshot["placement"])
        self.restore_learning(snapshot)

    def restore_learning(self, snapshot: Any) -> None:
        """Reload only what was learnt from history (lengths, latency fit): it does not
        depend on which policy ran, so a new leader keeps it whatever policy it starts with."""
        if isinstance(snapshot, dict):
            self.lengths.restore(snapshot.get("lengths"))
            self.policy.ctx.latency.restore(snapshot.get("latency"))
            self.policy.ctx.workflows.restore(snapshot.get("workflows"))

    # -- decisions --------------------------------------------------------------------------
    def next(self, now: float, workers: Sequence[WorkerView]) -> Decision | None:
        """The next dispatch, or None when nothing admissible is pending."""
        self.admission.observe(now, workers)
        limits = None if self.limits.off else self.limits
        room = self.admission.has_room
        by_model: dict[str, list[WorkerView]] = {}
        sized = False  # any context known (never in the simulator: nothing more to do there)
        for w in workers:
            sized = sized or w.max_model_len is not None
            ready = w.healthy and not w.draining and room(w, now)
            if ready and (limits is None or limits.has_room(w)):
                by_model.setdefault(w.model, []).append(w)
        if not by_model:
            return None
        longest = longest_contexts(workers) if sized else None
        gate = PoolGate(
            self.admission, by_model, now, self.hol_blocking, limits, self.placement, longest
        )
        try:
            job = self.policy.pop(now, gate)
        except StopPop:
            return None
        if job is None:
            return None
        admitting = [w for w in by_model[job.model] if gate.admit(job, w, now)]
        worker = self.placement.choose(job, admitting, now)
        decision = Decision(job, worker, self.admission.reserve(job))
        self.dispatched(decision, now)
        return decision

    def drain(
        self, now: float, workers: Sequence[WorkerView], limit: int | None = None
    ) -> list[Decision]:
        """Repeated `next`, each decision seeing the load the previous ones added."""
        views = {w.id: w for w in workers}
        decisions: list[Decision] = []
        while limit is None or len(decisions) < limit:
            decision = self.next(now, list(views.values()))
            if decision is None:
                break
            worker = decision.worker
            views[worker.id] = worker.with_dispatch(decision.reserved_tokens, decision.job.n_in)
            decisions.append(decision)
        return decisions

    def dispatched(self, decision: Decision, now: float) -> None:
        """Charge a dispatch (policy, placement, ledger): every decision `next` returns, and a
        fast-lane take the leader adopts (`SchedulerCore.adopt_granted`)."""
        job = decision.job
        job.dispatched_at = now
        job.worker = decision.worker.id
        self.policy.on_dispatch(job, now)
        self.placement.on_dispatch(job, decision.worker, now)
        cost = self.policy.ctx.cost.input_cost(job)
        self.policy.ctx.ledger.charge_input(job.path, job.n_in, cost, now)

    # -- progress ---------------------------------------------------------------------------
    def on_tokens(self, job: Job, n_out_delta: int, now: float) -> None:
        """`n_out_delta` more output tokens of a running job (adds them to `job.n_out`)."""
        if n_out_delta <= 0:
            return
        job.n_out += n_out_delta
        self.policy.on_tokens(job, n_out_delta, now)
        cost = self.policy.ctx.cost.output_cost(job, n_out_delta)
        self.policy.ctx.ledger.charge_output(job.path, n_out_delta, cost, now)

    def on_tokens_batch(self, reports: Sequence[TokenReport], now: float) -> None:
        """A batched progress report: `on_tokens` for every `(job, n_out_delta)`, in order.

        Each report is priced once; the policy hears the whole report (or, with a
        `counter_plan`, has its counters charged by the ledger), then the ledger is charged
        with it. Every counter and service sum ends up bit for bit as after one `on_tokens`
        per report.
        """
        policy = self.policy
        cost = policy.ctx.cost.output_cost
        charges: list[OutputCharge] = []
        charge = charges.append
        for job, n in reports:
            if n > 0:
                job.n_out += n
                charge((job, (job.tenant, job.app, job.agent), n, cost(job, n)))  # job.path
        if charges:
            plan = policy.counter_plan()
            if plan is None:
                policy.on_tokens_batch(charges, now)
            policy.ctx.ledger.charge_outputs(charges, now, plan)

    def released(self, job: Job, now: float) -> None:
        """A dispatched job left its worker without ending (re-queued after a worker failure,
        or its grant undone): the placement's bookkeeping and the job's count in its open
        workflow are given back (a re-queued job is counted again when it is pushed)."""
        self.placement.on_finish(job, Outcome("aborted", job.n_in, job.n_out), now)
        self.policy.ctx.workflows.on_withdrawn(job)

    def on_finish(self, job: Job, outcome: Outcome, now: float) -> None:
        """A running job ended; charges any output tokens not yet reported."""
        self.on_tokens(job, outcome.n_out - job.n_out, now)
        self.policy.ctx.workflows.on_finish(job, outcome.n_out, now)
        self.policy.on_finish(job, outcome, now)
        self.lengths.observe(job, outcome)
        self.policy.ctx.latency.observe(job, outcome)
        self.admission.on_finish(job, outcome, now)
        self.placement.on_finish(job, outcome, now)
        self.policy.ctx.ledger.record_completion(job.path, outcome.violated(job.slo), now)

    def tick(self, now: float) -> None:
        self.policy.ctx.workflows.tick(now)
        self.policy.tick(now)
