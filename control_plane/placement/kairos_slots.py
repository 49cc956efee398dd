"""Kairos's memory-aware time-slot dispatcher (docs/algorithms.md §19.3)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from control_plane.core.job import Job, Outcome
from control_plane.core.latency import total_time
from control_plane.core.placement import Placement
from control_plane.core.policy import PolicyContext
from control_plane.core.worker_view import WorkerView
from control_plane.placement.slots import Curve, SlotLedger, curve

IDLE_TOKENS = 0.5
"""A ledger whose peak is below this many tokens is idle: the float residue of curves
added and removed is not a request."""


class KairosSlotsParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    slot_s: float = Field(0.5, gt=0, le=60)
    cooldown_s: float = Field(5.0, ge=0)
    """After a worker reports a preemption, no new dispatch to it for this long."""


class KairosSlotsPlacement(Placement):
    """Each worker's KV use is predicted per `slot_s` slot from its running requests: a
    request holds `n_in + v·(t − start)` tokens until `start + ê`, where `ê` is the mode of
    its agent's single-call latency (KDE, from the workflow orchestrator; before eight samples,
    the latency model's time for the job) and `v = 1 / TPOT` of the latency model. A worker
    whose any slot would overflow its KV capacity with the new request is refused (`fits`);
    among the others the lowest predicted peak wins (ties by id); when none fits the request
    stays queued (a worker predicted idle takes any request, so none waits forever). A request
    that ends early releases its remaining slots; a worker that reported a preemption within
    `cooldown_s` is refused.

    Sees only what a live scheduler sees: prompt length, the output cap and the learned
    distributions — never a request's true output length. Its ledger is not checkpointed: a
    new leader predicts the requests already running as absent until they end.
    """

    name: ClassVar[str] = "kairos_slots"
    Params: ClassVar[type[BaseModel]] = KairosSlotsParams
    vetoes: ClassVar[bool] = True

    def __init__(self, params: BaseModel | None = None) -> None:
        super().__init__(params)
        assert isinstance(self.params, KairosSlotsParams)
        self.p = self.params
        self.ctx = PolicyContext()
        self._ledgers: dict[str, SlotLedger] = {}
        self._running: dict[str, tuple[str, Curve]] = {}
        self._last: tuple[tuple[int, int, float, float, float, float], Curve] | None = None
        """The last curve computed and its arguments: a decision asks for the same one once
        per worker it tries (`curve` is a pure function of them)."""

    def bind(self, ctx: PolicyContext) -> None:
        self.ctx = ctx

    def predicted_s(self, job: Job) -> float:
        mode = self.ctx.workflows.single_call_mode(job.path)
        return mode if mode is not None else total_time(job, self.ctx.latency)

    def _curve(self, job: Job, now: float) -> Curve:
        tpot = max(self.ctx.latency.tpot(job), 1e-6)
        args = (job.n_in, job.max_tokens, 1.0 / tpot, now, self.predicted_s(job), self.p.slot_s)
        if self._last is None or self._last[0] != args:
            self._last = (args, curve(*args))
        return self._last[1]

    def _ledger(self, worker: str, now: float) -> SlotLedger:
        ledger = self._ledgers.get(worker)
        if ledger is None:
            ledger = self._ledgers[worker] = SlotLedger(self.p.slot_s)
        ledger.advance(now)
        return ledger

    def _cooling(self, worker: WorkerView, now: float) -> bool:
        at = worker.last_preemption_at
        return at is not None and now - at < self.p.cooldown_s

    def peak_with(self, job: Job, worker: WorkerView, now: float) -> float:
        return self._ledger(worker.id, now).peak_with(self._curve(job, now))

    def fits(self, job: Job, worker: WorkerView, now: float) -> bool:
        if self._cooling(worker, now):
            return False
        ledger = self._ledger(worker.id, now)
        # a request predicted larger than a whole worker still goes to an idle one; idle is
        # under half a token, since adding and removing fractional curves leaves float residue
        idle = ledger.peak() < IDLE_TOKENS
        return idle or self.peak_with(job, worker, now) <= worker.kv_tokens

    def choose(self, job: Job, workers: Sequence[WorkerView], now: float) -> WorkerView:
        return min(workers, key=lambda w: (self.peak_with(job, w, now), w.id))

    def on_dispatch(self, job: Job, worker: WorkerView, now: float) -> None:
        c = self._curve(job, now)
        self._ledger(worker.id, now).add(c)
        self._running[job.id] = (worker.id, c)

    def on_finish(self, job: Job, outcome: Outcome, now: float) -> None:
        entry = self._running.pop(job.id, None)
        if entry is not None:
            worker, c = entry
            self._ledger(worker, now).add(c, sign=-1.0)  # the slots still ahead are freed

    def snapshot(self) -> dict[str, Any]:
        peaks = {w: round(ledger.peak(), 1) for w, ledger in sorted(self._ledgers.items())}
        return super().snapshot() | {"running": len(self._running), "predicted_peak": peaks}
