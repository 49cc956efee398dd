"""The live scheduler's memory: pending jobs (in the policy), running jobs and workers.

Pure: no I/O, time comes in as `now`. The I/O loop (`service.py`) feeds it arrivals, progress
and completions read from Redis and turns its decisions into grants. Everything here can be
rebuilt from Redis (queued envelopes, the in-flight map, the ledger checkpoint) by a new leader.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from control_plane.placement.dispatcher import Decision, Dispatcher
from control_plane.placement.worker_view import WorkerView
from control_plane.policies.base import PolicyContext
from control_plane.policies.job import Job, Outcome
from control_plane.policies.registry import build_policy
from control_plane.scheduler.scrape import WorkerSample

DEFAULT_MAX_NUM_SEQS = 256
DEFAULT_KV_TOKENS = 1_000_000


@dataclass(slots=True)
class Running:
    job: Job
    worker: str
    reserved: int


@dataclass(slots=True)
class WorkerState:
    """A registered worker plus what the scheduler knows of its load."""

    record: dict[str, Any]
    sample: WorkerSample | None = None
    inflight: dict[str, int] = field(default_factory=dict)
    failed: bool = False
    """Marked by a gateway's `worker_failed`; cleared by a healthy scrape after the cool-down."""
    failed_until: float = 0.0

    def view(self) -> WorkerView:
        rec, sample = self.record, self.sample
        kv_tokens = (sample.kv_tokens if sample and sample.kv_tokens else None) or int(
            rec.get("kv_tokens") or DEFAULT_KV_TOKENS
        )
        model = str(rec.get("model") or "")
        if not model and sample and sample.models:
            model = next(iter(sample.models))
        return WorkerView(
            id=str(rec["id"]),
            url=str(rec["url"]),
            model=model,
            max_num_seqs=int(rec.get("max_num_seqs") or DEFAULT_MAX_NUM_SEQS),
            kv_tokens=kv_tokens,
            healthy=bool(sample and sample.healthy) and not self.failed,
            draining=rec.get("status", "active") != "active",
            inflight=len(self.inflight),
            inflight_tokens=sum(self.inflight.values()),
            running=int(sample.running) if sample else 0,
            waiting=int(sample.waiting) if sample else 0,
            kv_usage=float(sample.kv_usage) if sample else 0.0,
            preemptions=int(sample.preemptions_total) if sample else 0,
        )


class SchedulerCore:
    """Applies arrivals/progress/completions and produces dispatch decisions.

    Guarantees: a job id is pending at most once and running at most once; a completion or
    withdrawal for an unknown id is ignored (events are delivered at least once); output
    tokens are charged from cumulative counts, so a repeated progress event charges nothing.
    """

    def __init__(self, dispatcher: Dispatcher, failure_cooldown_s: float = 5.0) -> None:
        self.dispatcher = dispatcher
        self.failure_cooldown_s = failure_cooldown_s
        self.pending: dict[str, Job] = {}
        self.running: dict[str, Running] = {}
        self.workers: dict[str, WorkerState] = {}

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
        if weights:
            self._set_weights(job, weights)
        job.dispatched_at = None
        job.worker = None
        self.pending[job.id] = job
        self.dispatcher.push(job, now)

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
        reserved = self.dispatcher.admission.reserve(job)
        job.worker = worker_id
        job.dispatched_at = job.dispatched_at or now
        self.running[job.id] = Running(job, worker_id, reserved)
        state = self.workers.get(worker_id)
        if state is not None:
            state.inflight[job.id] = reserved

    def withdraw(self, job_id: str) -> Job | None:
        if self.pending.pop(job_id, None) is None:
            return None
        return self.dispatcher.remove(job_id)

    def progress(self, job_id: str, n_out: int, now: float) -> None:
        run = self.running.get(job_id)
        if run is not None and n_out > run.job.n_out:
            self.dispatcher.on_tokens(run.job, n_out - run.job.n_out, now)

    def complete(self, job_id: str, outcome: Outcome, now: float) -> Job | None:
        """A request ended (any status); frees its slot. Pending ones are withdrawn."""
        if job_id in self.pending:
            return self.withdraw(job_id)
        run = self.running.pop(job_id, None)
        if run is None:
            return None
        self._release(run)
        self.dispatcher.on_finish(run.job, outcome, now)
        return run.job

    def worker_failed(self, worker_id: str, now: float) -> None:
        state = self.workers.get(worker_id)
        if state is not None:
            state.failed = True
            state.failed_until = now + self.failure_cooldown_s

    # -- workers ----------------------------------------------------------------------------
    def set_workers(self, records: list[dict[str, Any]]) -> None:
        """Replace the registry view, keeping in-flight bookkeeping of known workers."""
        fresh: dict[str, WorkerState] = {}
        for rec in records:
            old = self.workers.get(str(rec["id"]))
            state = old or WorkerState(record=rec)
            state.record = rec
            fresh[str(rec["id"])] = state
        self.workers = fresh

    def observe(self, worker_id: str, sample: WorkerSample) -> None:
        state = self.workers.get(worker_id)
        if state is None:
            return
        state.sample = sample
        if sample.healthy and sample.scraped_at >= state.failed_until:
            state.failed = False

    # -- decisions --------------------------------------------------------------------------
    def decide(self, now: float, limit: int | None = None) -> list[Decision]:
        views = [w.view() for w in self.workers.values()]
        decisions = self.dispatcher.drain(now, views, limit)
        for d in decisions:
            self.pending.pop(d.job.id, None)
            self.running[d.job.id] = Running(d.job, d.worker.id, d.reserved_tokens)
            self.workers[d.worker.id].inflight[d.job.id] = d.reserved_tokens
        return decisions

    def undo(self, decision: Decision) -> None:
        """The grant was refused (the request left meanwhile): forget it."""
        run = self.running.pop(decision.job.id, None)
        if run is not None:
            self._release(run)

    def switch_policy(self, name: str, params: dict[str, Any] | None, now: float) -> None:
        """Zero-downtime switch; raises UnknownPolicyError/PolicyParamsError when invalid."""
        self.dispatcher.switch(build_policy(name, self.ctx, params), now)

    def tick(self, now: float) -> None:
        self.dispatcher.tick(now)

    def node_counts(self) -> list[dict[str, Any]]:
        """Queued and in-flight requests per node at every level (tenant, app, agent)."""
        counts: dict[tuple[str, ...], list[int]] = {}
        jobs = [(j, 0) for j in self.pending.values()] + [(r.job, 1) for r in self.running.values()]
        for job, slot in jobs:
            for depth in (1, 2, 3):
                counts.setdefault(job.path[:depth], [0, 0])[slot] += 1
        return [
            {"path": list(path), "queued": q, "inflight": i}
            for path, (q, i) in sorted(counts.items())
        ]

    # -- views ------------------------------------------------------------------------------
    def tenant_view(self, now: float) -> dict[str, dict[str, Any]]:
        """Per tenant: queue depth, in-flight, virtual counter and service (for the admin API)."""
        ledger = self.ctx.ledger
        out: dict[str, dict[str, Any]] = {}
        for node in ledger.nodes_at(1):
            out[node[0]] = _node_json(ledger, node, now)
        for job in self.pending.values():
            out.setdefault(job.tenant, _empty())["queued"] += 1
        for run in self.running.values():
            out.setdefault(run.job.tenant, _empty())["inflight"] += 1
        return out

    def _release(self, run: Running) -> None:
        state = self.workers.get(run.worker)
        if state is not None:
            state.inflight.pop(run.job.id, None)

    def _set_weights(self, job: Job, weights: dict[str, float]) -> None:
        w = self.ctx.weights
        for node, key in ((job.path[:1], "tenant"), (job.path[:2], "app"), (job.path, "agent")):
            value = weights.get(key)
            if value is not None and value > 0 and math.isfinite(value):
                w.set(node, float(value))


def _empty() -> dict[str, Any]:
    return {
        "queued": 0,
        "inflight": 0,
        "counter": 0.0,
        "service": 0.0,
        "tokens_in": 0,
        "tokens_out": 0,
        "completed": 0,
        "violations_window": 0.0,
        "service_window": 0.0,
    }


def _node_json(ledger: Any, node: tuple[str, ...], now: float) -> dict[str, Any]:
    stats = ledger.stats(node)
    window = ledger.window(node, now)
    out = _empty()
    out.update(
        counter=ledger.counter(node),
        service=ledger.service(node),
        service_window=window.service,
        violations_window=window.violations,
        completed_window=window.completed,
        violation_rate=window.violation_rate,
    )
    if stats is not None:
        out.update(
            tokens_in=stats.tokens_in, tokens_out=stats.tokens_out, completed=stats.completed
        )
    return out
