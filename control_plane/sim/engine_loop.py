"""The discrete-event simulator: the live scheduler's code path on a virtual clock.

Rule (docs/algorithms.md §0.6, "one policy, two clocks"): the simulator drives the same
`SchedulerCore` the live scheduler drives, over the same `Dispatcher(policy, admission,
placement)` built from the same registries; requests run on `workers.engine.Engine` instances
of the scenario's profiles. It does what the live scheduler's I/O loop does — arrivals →
`arrive`; queue timeouts → `withdraw`; `decide` → `engine.add`; streamed tokens →
`progress_batch`, reported for every running request together every `progress_s` (the
gateway's batched progress events; 0 = after every engine step; an image model's answer does
not stream, so its output is charged, and its first token seen, on completion); completions
→ `complete`; `tick` every `tick_s` — and nothing else. It keeps only the clock, the engines,
the workload and each request's record.

Event loop: a heap of `(time, seq, kind, worker)` for engine step boundaries, progress
flushes and ticks, beside the time-sorted arrival list. At one instant: engines whose event is
due are advanced (freeing capacity), tokens flushed, the tick run, arrivals pushed, queue
timeouts applied, and then — if any of that can change a decision — the dispatcher is drained
once against fresh worker views. Arrivals stop at `duration_s`; the run ends when
everything has finished or at `duration_s + drain_s`, when what is still queued is withdrawn
and what is running is aborted. Guarantee: every arrival ends in exactly one final status.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable
from dataclasses import replace

from control_plane.core.job import Job
from control_plane.core.scheduler_core import SchedulerCore
from control_plane.sim.backlog import BacklogMonitor
from control_plane.sim.cluster import SimWorker
from control_plane.sim.records import RequestRecord
from control_plane.sim.setup import SimSetup
from control_plane.sim.workload import RequestSpec
from workers.engine.step import EngineRequest, StepResult

ENGINE, FLUSH, TICK = 0, 1, 2
Progress = Callable[[float], None]


def _freed(
    charged: bool, waiting: int, preempted: int, waiting_now: int, preempted_now: int
) -> bool:
    """Whether an engine event can change the next dispatch decision.

    Admission reads in-flight counts and reserved tokens (changed only by completions), the
    engine's waiting queue and its KV usage (which only falls on completions and preemptions);
    the policy's order moves only with charges (completions, token flushes), arrivals and
    ticks. Skipping the other events skips only cycles that would dispatch nothing; a
    time-driven admission (Statera's control period) is re-examined at every tick.
    """
    return charged or waiting_now < waiting or preempted_now > preempted


class Active:
    """A dispatched request: its job, record, worker and output tokens not yet reported."""

    __slots__ = ("id", "job", "record", "unflushed", "worker")

    def __init__(self, job: Job, record: RequestRecord, worker: SimWorker) -> None:
        self.id = job.id
        self.job = job
        self.record = record
        self.worker = worker
        self.unflushed = 0


class Simulator:
    """Runs one scenario under one scheduler setup (see the module docstring)."""

    def __init__(
        self,
        setup: SimSetup,
        specs: list[RequestSpec],
        progress: Progress | None = None,
        core: SchedulerCore | None = None,
        advisor: Callable[[SchedulerCore, float], None] | None = None,
    ) -> None:
        self.setup = setup
        self.specs = [spec for spec in specs if spec.after is None]
        self._waiting: dict[str, list[RequestSpec]] = {}
        """Workflow calls not issued yet, by the call whose end releases them."""
        for spec in specs:
            if spec.after is not None:
                self._waiting.setdefault(spec.after, []).append(spec)
        self._released: list[tuple[float, int, RequestSpec]] = []
        """Workflow calls released by their upstream's end, by arrival (a heap)."""
        self.core = core or SchedulerCore(setup.dispatcher, controller=setup.controller)
        """Over `setup.dispatcher`; given only to observe the run (a recording subclass)."""
        self.workers = setup.workers
        self.by_id = {w.id: w for w in self.workers}
        self.core.set_workers(self.by_id)
        self.records: list[RequestRecord] = []
        self.pending: dict[str, RequestRecord] = {}
        self.active: dict[str, Active] = {}
        self.per_worker: list[dict[str, Active]] = [{} for _ in self.workers]
        self.backlog = BacklogMonitor(setup)
        self._progress = progress
        self._advisor = advisor
        """Asks the `llm` selector's questions after each tick (`sim/advisor.py`)."""
        self._heap: list[tuple[float, int, int, int]] = []
        self._seq = 0
        self._next_at: list[float | None] = [None] * len(self.workers)
        self._flush_at: float | None = None
        self._timeouts: deque[tuple[float, str]] = deque()
        self.busy_s = [0.0] * len(self.workers)
        self.now = 0.0

    # -- loop ---------------------------------------------------------------------------------
    def run(self) -> list[RequestRecord]:
        sc = self.setup.scenario
        end = sc.duration_s + sc.drain_s
        self._push(0.0, TICK, -1)
        cursor, specs = 0, self.specs
        while True:
            t_heap = self._heap[0][0] if self._heap else math.inf
            t_arr = specs[cursor].arrival if cursor < len(specs) else math.inf
            t_rel = self._released[0][0] if self._released else math.inf
            t = min(t_heap, t_arr, t_rel)
            if t > end or (t == math.inf):
                break
            self.now = t
            changed = False
            while self._heap and self._heap[0][0] <= t:
                _, _, kind, index = heapq.heappop(self._heap)
                if kind == ENGINE:
                    changed |= self._engine_event(index, t)
                elif kind == FLUSH:
                    changed |= self._flush_all(t)
                elif self._tick(t, end, cursor < len(specs) or bool(self._released)):
                    changed = True
            while cursor < len(specs) and specs[cursor].arrival <= t:
                self._arrive(specs[cursor], cursor, t)
                cursor += 1
                changed = True
            while self._released and self._released[0][0] <= t:
                _, seq, spec = heapq.heappop(self._released)
                self._arrive(spec, seq, t)
                changed = True
            changed |= self._expire(t)
            if changed and self.pending:
                self._dispatch(t)
            done = cursor == len(specs) and not self._released
            if done and not self.pending and not self.active:
                break
        self._finish_run(end if (self.pending or self.active) else self.now)
        return self.records

    def _push(self, t: float, kind: int, index: int) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (t, self._seq, kind, index))

    def _schedule(self, index: int) -> None:
        t = self.workers[index].engine.next_event_time()
        if t is not None and t != self._next_at[index]:
            self._push(t, ENGINE, index)
        self._next_at[index] = t

    def _tick(self, t: float, end: float, arriving: bool) -> bool:
        self.core.tick(t)
        if self._advisor is not None:
            self._advisor(self.core, t)
        if self._progress is not None:
            self._progress(t)
        busy = arriving or bool(self.pending) or bool(self.active)
        if busy and t + self.setup.tick_s <= end:
            self._push(t + self.setup.tick_s, TICK, -1)
        return bool(self.pending)

    # -- arrivals and timeouts ----------------------------------------------------------------
    def _arrive(self, spec: RequestSpec, seq: int, t: float) -> None:
        factor = self.setup.unit_factors[spec.model]
        record = spec.record(factor)
        self.records.append(record)
        cap = self.setup.queue_caps.get(spec.tenant)
        if cap is not None and self.backlog.queued_by[spec.tenant] >= cap:
            record.status, record.finished = "rejected", t  # the gateway's 429: never queued
            return
        job = Job(
            id=spec.id,
            tenant=spec.tenant,
            arrival=spec.arrival,
            n_in=spec.n_in,
            max_tokens=spec.cap,
            app=spec.app,
            agent=spec.agent,
            model=spec.model,
            seq=seq,
            task=spec.task,
            tier=spec.tier,
            slo=spec.slo,
            unit_factor=factor,
            workflow=spec.workflow,
            upstream=spec.upstream,
        )
        self.pending[job.id] = record
        self.core.arrive(job, None, t)
        self.backlog.queued(spec.tenant, +1)
        timeout = self.setup.queue_timeout_s
        if timeout is not None:
            self._timeouts.append((spec.arrival + timeout, job.id))

    def _expire(self, t: float) -> bool:
        expired = False
        while self._timeouts and self._timeouts[0][0] <= t:
            _, job_id = self._timeouts.popleft()
            record = self.pending.pop(job_id, None)
            if record is not None and self.core.time_out(job_id, t) is not None:
                record.status = "timeout"
                record.finished = t
                self.backlog.queued(record.tenant, -1)
                expired = True
        return expired

    # -- dispatch -------------------------------------------------------------------------------
    def _dispatch(self, t: float) -> None:
        decisions = self.core.decide(t)
        for d in decisions:
            job = d.job
            worker = self.by_id[d.worker.id]
            record = self.pending.pop(job.id)
            record.status, record.dispatched, record.worker = "running", t, worker.id
            active = Active(job, record, worker)
            self.active[job.id] = active
            index = worker.index
            self.per_worker[index][job.id] = active
            request = EngineRequest(job.id, job.n_in, record.length, job.tier, job.arrival)
            worker.engine.add(request, t)
            self.backlog.queued(job.tenant, -1)
            self._schedule(index)
        if decisions:
            self.backlog.sample(t)
            self._arm_flush(t)

    # -- engines ------------------------------------------------------------------------------
    def _engine_event(self, index: int, t: float) -> bool:
        """Advance one engine; True when admission may now accept more (see `_freed`)."""
        if self._next_at[index] != t:
            return False  # stale: the engine's next event moved when a request was added
        engine = self.workers[index].engine
        self._next_at[index] = None
        waiting, preemptions = engine.num_waiting, engine.num_preemptions
        finished: list[tuple[Active, float]] = []
        for step in engine.advance(t):
            self._step(index, step, finished)
        for active, at in finished:
            self._complete(active, at, t)
        flushed = self.setup.progress_s == 0
        if flushed:
            self._flush(index, t)
        self._schedule(index)
        changed = bool(finished) or flushed
        return _freed(changed, waiting, preemptions, engine.num_waiting, engine.num_preemptions)

    def _step(self, index: int, step: StepResult, finished: list[tuple[Active, float]]) -> None:
        active, end = self.active, step.end
        self.busy_s[index] += end - step.start
        for ev in step.tokens:
            a = active[ev.req_id]
            a.unflushed += ev.n
            if ev.first:
                a.record.first_token = end
            if ev.finished:
                finished.append((a, end))
        if step.preempted:
            self.workers[index].last_preemption_at = end

    def _flush(self, index: int, t: float) -> None:
        """One worker's share of a progress report, charged as one batch (`progress_batch`)."""
        reports: list[tuple[str, int]] = []
        report = reports.append
        if self.workers[index].streams:  # else charged once, on completion
            for a in self.per_worker[index].values():
                n = a.unflushed
                if n:
                    record = a.record
                    n += record.n_out
                    record.n_out = n
                    a.unflushed = 0
                    report((a.id, n))
        if reports:
            self.core.progress_batch(reports, t)
        self.backlog.sample(t)

    def _flush_all(self, t: float) -> bool:
        """The gateway's batched progress report: every running request's new tokens at once."""
        self._flush_at = None
        for index in range(len(self.workers)):
            self._flush(index, t)
        self._arm_flush(t)
        return True

    def _arm_flush(self, t: float) -> None:
        if self._flush_at is None and self.active and self.setup.progress_s > 0:
            self._flush_at = t + self.setup.progress_s
            self._push(self._flush_at, FLUSH, -1)

    def _complete(self, a: Active, at: float, t: float) -> None:
        record = a.record
        record.n_out += a.unflushed
        a.unflushed = 0
        record.status, record.finished = "ok", at
        if not a.worker.streams:
            record.first_token = at  # the answer comes whole
        self._release(a)
        self.core.complete(a.job.id, record.outcome(), t)
        self._issue_next(a.job.id, at)

    def _issue_next(self, job_id: str, at: float) -> None:
        """The workflow calls waiting on `job_id` arrive after their think time (a call that
        did not end `ok` releases nothing: its workflow stops there, as agent code would)."""
        for spec in self._waiting.pop(job_id, ()):
            self._seq += 1
            arrival = at + spec.think_s
            heapq.heappush(
                self._released,
                (arrival, len(self.specs) + self._seq, replace(spec, arrival=arrival)),
            )

    def _release(self, a: Active) -> None:
        del self.active[a.job.id]
        del self.per_worker[a.worker.index][a.job.id]

    # -- end of run -----------------------------------------------------------------------------
    def _finish_run(self, t: float) -> None:
        for _, _, spec in self._released:  # issued by agent code, due after the end
            record = spec.record(self.setup.unit_factors[spec.model])
            record.status, record.finished = "withdrawn", t
            self.records.append(record)
        self._released.clear()
        for job_id, record in list(self.pending.items()):
            if self.core.withdraw(job_id) is not None:
                record.status, record.finished = "withdrawn", t
        self.pending.clear()
        for a in list(self.active.values()):
            a.worker.engine.abort(a.job.id, t)
            a.record.n_out += a.unflushed  # tokens seen so far; the step in progress is lost
            a.unflushed = 0
            a.record.status, a.record.finished = "aborted", t
            self._release(a)
            self.core.complete(a.job.id, a.record.outcome(), t)
        self.now = t
