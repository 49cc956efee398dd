"""The scheduler's memory — pending jobs (in the policy), running jobs, workers — for both clocks.

Pure: no I/O, time comes in as `now`. The live scheduler's I/O loop (`scheduler/service.py`)
feeds it arrivals, progress and completions read from Redis and turns its decisions into
grants; the simulator (`sim/engine_loop.py`) feeds it the same inputs from its engines and
starts its decisions on them. What each knows of a worker beyond the core's own in-flight
records comes from a `WorkerProbe`: scraped `vllm:*` metrics live, the engine's fields in the
simulator. Everything here can be rebuilt from Redis (queued envelopes, the in-flight map,
the ledger checkpoint) by a new leader.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from control_plane.core.dispatcher import Decision, Dispatcher
from control_plane.core.job import Job, Outcome
from control_plane.core.limits import ExecutionLimits
from control_plane.core.live_windows import LiveWindows
from control_plane.core.policy import Policy, PolicyContext
from control_plane.core.worker_view import WorkerView


class Controller(Protocol):
    """Watches arrivals and ends and may switch the policy each cycle (`control.meta`)."""

    def on_arrival(self, job: Job, now: float) -> None: ...

    def on_finish(self, job: Job, outcome: Outcome, now: float) -> None: ...

    def step(self, core: SchedulerCore, now: float) -> object: ...


class WorkerProbe(Protocol):
    """What is known of one worker apart from the core's in-flight records."""

    def view(
        self, inflight: int, inflight_tokens: int, prefilling: int = 0, prefill_tokens: int = 0
    ) -> WorkerView:
        """The worker as admission and placement see it, with the core's in-flight counts
        (and, of those, the ones before their first output token and their prompt tokens)."""
        ...


@dataclass(slots=True)
class Running:
    job: Job
    worker: str
    reserved: int


@dataclass(slots=True)
class WorkerSlot:
    """A worker's probe plus the core's bookkeeping for it: in-flight jobs and failure mark."""

    probe: WorkerProbe
    inflight: dict[str, int] = field(default_factory=dict)
    """Job id → KV tokens admission reserved for it."""
    inflight_tokens: int = 0
    prefill: dict[str, int] = field(default_factory=dict)
    """Job id → prompt tokens, for in-flight jobs with no output token reported yet."""
    prefill_tokens: int = 0
    failed: bool = False
    """Marked by a `worker_failed` report; cleared by `worker_recovered` after the cool-down."""
    failed_until: float = 0.0
    lent: int = 0
    """Slots lent to the gateways' fast lane and not yet adopted or reclaimed: occupied."""

    def view(self) -> WorkerView:
        view = self.probe.view(
            len(self.inflight) + self.lent,
            self.inflight_tokens,
            len(self.prefill),
            self.prefill_tokens,
        )
        return dataclasses.replace(view, healthy=False) if self.failed else view

    def hold(self, job_id: str, reserved: int, n_in: int | None = None) -> None:
        """Count the job against this worker; `n_in` given: it is still before its first
        output token."""
        self.inflight_tokens += reserved - self.inflight.get(job_id, 0)
        self.inflight[job_id] = reserved
        if n_in is not None and job_id not in self.prefill:
            self.prefill[job_id] = n_in
            self.prefill_tokens += n_in

    def prefilled(self, job_id: str) -> None:
        """The job reported an output token: its prefill is done."""
        self.prefill_tokens -= self.prefill.pop(job_id, 0)

    def release(self, job_id: str) -> None:
        self.inflight_tokens -= self.inflight.pop(job_id, 0)
        self.prefilled(job_id)


class SchedulerCore:
    """Applies arrivals/progress/completions and produces dispatch decisions.

    Guarantees: a job id is pending at most once and running at most once; a completion or
    withdrawal for an unknown id is ignored (events are delivered at least once); output
    tokens are charged from cumulative counts, so a repeated progress event charges nothing.
    """

    def __init__(
        self,
        dispatcher: Dispatcher,
        failure_cooldown_s: float = 5.0,
        controller: Controller | None = None,
    ) -> None:
        self.dispatcher = dispatcher
        self.failure_cooldown_s = failure_cooldown_s
        self.controller = controller
        """Switches the policy automatically when set (the `auto` policy)."""
        self.controller_error: str | None = None
        """Why the controller was detached: an error in it never stops scheduling."""
        self.fairness: dict[str, float] = {}
        """The `fairness` knob's α and β (those set), given to every policy the meta-controller
        builds that takes them (a pinned policy gets them in its own params)."""
        self.knob_errors: dict[str, str] = {}
        """Knob name → why its value could not be applied (the core kept what it had, or took
        the default): shown in the live view until a value of that knob is applied."""
        self.pending: dict[str, Job] = {}
        self.running: dict[str, Running] = {}
        self.workers: dict[str, WorkerSlot] = {}
        """In the order decisions see them (the registry's, or the scenario's)."""
        self.watch: LiveWindows | None = None
        """Offered load and queue waits for the live view; set by the live scheduler only."""

    @property
    def ctx(self) -> PolicyContext:
        return self.dispatcher.policy.ctx

    # -- inputs -----------------------------------------------------------------------------
    def arrive(self, job: Job, weights: dict[str, float] | None, now: float) -> None:
        """A queued request (new, re-queued after a worker failure, or found on takeover)."""
        if job.id in self.pending:
            return
        previous = self.running.pop(job.id, None)
        if previous is not None:
            self._release(previous)
            self.dispatcher.released(previous.job, now)
        if weights:
            self._set_weights(job, weights)
        job.dispatched_at = None
        job.worker = None
        self.pending[job.id] = job
        self.dispatcher.push(job, now)
        if self.controller is not None and previous is None:
            self._guarded(self.controller.on_arrival, job, now)
        if self.watch is not None and previous is None:
            cost = self.ctx.cost
            offered = cost.input_cost(job) + cost.output_cost(job, job.expected_out)
            self.watch.arrived(job.path, now, offered)

    def adopt_pending(self, queued: list[tuple[Job, dict[str, float]]], now: float) -> None:
        """A new leader's queue, handed over at once so restored counters stay as they were."""
        fresh = []
        for job, weights in queued:
            if job.id in self.pending or job.id in self.running:
                continue
            if weights:
                self._set_weights(job, weights)
            self.pending[job.id] = job
            fresh.append(job)
        self.dispatcher.adopt(fresh, now)

    def adopt_running(self, job: Job, worker_id: str, now: float) -> None:
        """A request found in flight on takeover: count it against its worker."""
        self.dispatcher.lengths.label(job)
        reserved = self.dispatcher.admission.reserve(job)
        job.worker = worker_id
        job.dispatched_at = job.dispatched_at or now
        self.running[job.id] = Running(job, worker_id, reserved)
        slot = self.workers.get(worker_id)
        if slot is not None:
            slot.hold(job.id, reserved, job.n_in if job.n_out == 0 else None)

    def adopt_granted(
        self, job: Job, weights: dict[str, float] | None, worker_id: str, now: float
    ) -> bool:
        """A request a gateway granted itself on a slot this leader lent (the fast lane): it
        arrives and is dispatched to `worker_id` at once, charged as any dispatch (the policy
        pops it, then policy, placement and ledger are charged), and the slot stops counting
        as lent. False (nothing changes) for an id already known."""
        if job.id in self.pending or job.id in self.running:
            return False
        self.arrive(job, weights, now)
        if self.dispatcher.policy.pop(now, lambda j: j.id == job.id) is not job:
            raise RuntimeError(f"policy {self.dispatcher.policy.name} did not pop {job.id}")
        del self.pending[job.id]
        slot = self.workers.get(worker_id)
        view = slot.view() if slot else WorkerView(worker_id, job.model, 1, 1, healthy=False)
        decision = Decision(job, view, self.dispatcher.admission.reserve(job))
        self.dispatcher.dispatched(decision, now)
        self.running[job.id] = Running(job, worker_id, decision.reserved_tokens)
        if slot is not None:
            slot.lent = max(0, slot.lent - 1)
            slot.hold(job.id, decision.reserved_tokens, job.n_in)
        if self.watch is not None:
            self.watch.dispatched(job.path, now, now - job.arrival)
        return True

    def discard(self, job_id: str) -> None:
        """Forget a job whose arrival or adoption raised part-way, wherever it got to (pending,
        the policy's queue), so that no later decision grants a job set aside."""
        self.pending.pop(job_id, None)
        with contextlib.suppress(Exception):  # the policy that raised may raise again
            self.dispatcher.remove(job_id)

    def withdraw(self, job_id: str) -> Job | None:
        if self.pending.pop(job_id, None) is None:
            return None
        return self.dispatcher.remove(job_id)

    def time_out(self, job_id: str, now: float) -> Job | None:
        """A queued request gave up waiting (the queue timeout): withdrawn, and an end the
        controller counts (a violation when the request carries an SLO)."""
        job = self.withdraw(job_id)
        if job is None:
            return None
        outcome = Outcome("timeout", job.n_in, 0)
        # the fairness windows (SAFI) count it as the report does: never served, violated
        self.dispatcher.policy.ctx.ledger.record_completion(
            job.path, outcome.violated(job.slo), now
        )
        if self.controller is not None:
            self._guarded(self.controller.on_finish, job, outcome, now)
        return job

    def progress(self, job_id: str, n_out: int, now: float) -> None:
        """`n_out` output tokens so far (cumulative: a repeated report charges nothing)."""
        run = self.running.get(job_id)
        if run is not None and n_out > run.job.n_out:
            self._first_token(run)
            self.dispatcher.on_tokens(run.job, n_out - run.job.n_out, now)

    def progress_batch(self, reports: Sequence[tuple[str, int]], now: float) -> None:
        """One batched progress report `(job id, n_out so far)`, charged as one batch."""
        running, workers = self.running, self.workers
        deltas = []
        for job_id, n_out in reports:
            run = running.get(job_id)
            if run is not None:
                job = run.job
                if n_out > job.n_out:
                    slot = workers.get(run.worker)  # `_first_token`, inline: the hot path
                    if slot is not None and job_id in slot.prefill:
                        slot.prefilled(job_id)
                    deltas.append((job, n_out - job.n_out))
        if deltas:
            self.dispatcher.on_tokens_batch(deltas, now)

    def complete(self, job_id: str, outcome: Outcome, now: float) -> Job | None:
        """A request ended (any status); frees its slot. Pending ones are withdrawn."""
        if job_id in self.pending:
            return self.withdraw(job_id)
        run = self.running.pop(job_id, None)
        if run is None:
            return None
        self._release(run)
        self.dispatcher.on_finish(run.job, outcome, now)
        if self.controller is not None:
            self._guarded(self.controller.on_finish, run.job, outcome, now)
        return run.job

    def worker_failed(self, worker_id: str, now: float) -> None:
        """A request failed on the worker at `now`: it takes nothing for `failure_cooldown_s`
        from then (a failure reported late never shortens a later one's cool-down)."""
        slot = self.workers.get(worker_id)
        if slot is not None:
            slot.failed = True
            slot.failed_until = max(slot.failed_until, now + self.failure_cooldown_s)

    def worker_recovered(self, worker_id: str, at: float) -> None:
        """The worker was seen healthy at `at`: clears its failure mark after the cool-down."""
        slot = self.workers.get(worker_id)
        if slot is not None and at >= slot.failed_until:
            slot.failed = False

    # -- workers ----------------------------------------------------------------------------
    def set_workers(self, probes: Mapping[str, WorkerProbe]) -> None:
        """Replace the set of workers, keeping the in-flight bookkeeping of known ones."""
        fresh: dict[str, WorkerSlot] = {}
        for worker_id, probe in probes.items():
            slot = self.workers.get(worker_id) or self._new_slot(worker_id, probe)
            slot.probe = probe
            fresh[worker_id] = slot
        self.workers = fresh

    def _new_slot(self, worker_id: str, probe: WorkerProbe) -> WorkerSlot:
        """A slot for a worker id the core does not know, holding what the core still counts
        running there (a worker removed and registered again while its requests run), lest it
        be granted up to its capacity on top of them."""
        slot = WorkerSlot(probe)
        for run in self.running.values():
            if run.worker == worker_id:
                job = run.job
                slot.hold(job.id, run.reserved, job.n_in if job.n_out == 0 else None)
        return slot

    # -- decisions --------------------------------------------------------------------------
    def decide(self, now: float, limit: int | None = None) -> list[Decision]:
        views = [w.view() for w in self.workers.values()]
        decisions = self.dispatcher.drain(now, views, limit)
        for d in decisions:
            self.pending.pop(d.job.id, None)
            self.running[d.job.id] = Running(d.job, d.worker.id, d.reserved_tokens)
            self.workers[d.worker.id].hold(d.job.id, d.reserved_tokens, d.job.n_in)
            if self.watch is not None:
                self.watch.dispatched(d.job.path, now, now - d.job.arrival)
        return decisions

    def disown(self, job_id: str) -> Job | None:
        """A request adopted running whose end the restored ledger already charged (its
        `complete` was applied before the checkpoint): its slot is freed, nothing charged."""
        run = self.running.pop(job_id, None)
        if run is not None:
            self._release(run)
        return None if run is None else run.job

    def undo(self, decision: Decision) -> None:
        """The grant was refused (the request left meanwhile): forget it."""
        run = self.running.pop(decision.job.id, None)
        if run is not None:
            self._release(run)
            job = run.job
            self.dispatcher.released(job, job.dispatched_at or job.arrival)

    def switch_policy(self, policy: Policy, now: float) -> None:
        """Zero-downtime switch: `policy` (built over `ctx`) adopts every pending job."""
        self.dispatcher.switch(policy, now)

    def tick(self, now: float) -> None:
        self.dispatcher.tick(now)
        if self.controller is not None:
            self._guarded(self.controller.step, self, now)

    def _guarded(self, call: Any, *args: Any) -> None:
        """Run a controller hook; on any error detach the controller (the policy it chose
        keeps running) and keep the reason in `controller_error` for the owner to report."""
        try:
            call(*args)
        except Exception as exc:  # a controller bug must not stop scheduling
            self.controller_error = f"{type(exc).__name__}: {exc}"
            self.detach_controller()

    def detach_controller(self) -> None:
        """No more automatic control: the policy stays, the execution limits are lifted."""
        self.controller = None
        self.dispatcher.limits = ExecutionLimits()

    def _first_token(self, run: Running) -> None:
        slot = self.workers.get(run.worker)
        if slot is not None and slot.prefill:
            slot.prefilled(run.job.id)

    def _release(self, run: Running) -> None:
        slot = self.workers.get(run.worker)
        if slot is not None:
            slot.release(run.job.id)

    def _set_weights(self, job: Job, weights: dict[str, float]) -> None:
        w = self.ctx.weights
        for node, key in ((job.path[:1], "tenant"), (job.path[:2], "app"), (job.path, "agent")):
            value = weights.get(key)
            if value is not None and value > 0 and math.isfinite(value):
                w.set(node, float(value))
