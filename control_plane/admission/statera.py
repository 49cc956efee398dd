"""Statera admission (docs/algorithms.md §12.2): conformal KV fence plus a dual control loop."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from control_plane.admission.conformal import ConformalLengthBound
from control_plane.core.admission import Admission
from control_plane.core.dual_loop import DualLoop
from control_plane.core.job import Job, Outcome
from control_plane.core.worker_view import WorkerView


class StateraParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    epsilon: float = Field(0.05, gt=0.0, lt=1.0)
    delta_frag: float = Field(0.1, ge=0.0, lt=1.0)
    error_window: int = Field(500, ge=20)
    gamma: float = Field(0.005, ge=0.0, le=0.1)
    """Step of the adaptive conformal level (0: plain split conformal at ε)."""
    u_low: float = Field(0.7, ge=0.0, le=1.0)
    u_high: float = Field(0.9, ge=0.0, le=1.0)
    utilisation: Literal["kv_usage", "reserved"] = "kv_usage"
    """`kv_usage`: scraped KV usage; `reserved`: reserved tokens over the fence."""
    period_s: float = Field(0.5, gt=0.0)
    """Control period, so that live and simulated cycles update at the same pace."""
    window: int = Field(10, ge=1)
    """W: samples averaged into ū, and errors averaged by the outer loop."""
    budget_min: float = Field(0.3, gt=0.0, le=1.0)
    budget_max: float = Field(1.0, gt=0.0, le=1.0)
    eta_b: float = Field(0.5, ge=0.0)
    n_min: int = Field(1, ge=1)
    n_max: int = Field(256, ge=1)
    eta_n: float = Field(32.0, ge=0.0)


class StateraAdmission(Admission):
    """Admit when the worker stays under both the KV fence and the controlled caps.

    Fence: `Σ_in-flight (n_in + l_upper) ≤ M_cap · (1 − δ_frag) · B_token` with `l_upper` the
    conformal bound, so an admitted set overflows the KV cache with probability ≲ ε. Loops,
    every `period_s`: ū = mean of the last W utilisation samples, `e = ū − clip(ū, band)`;
    inner P-loop `B_token ← clip(B_token − η_B · e)` (a fraction of the fence), outer I-loop
    `N_run ← clip(N_run − η_N · mean(last W errors))`, the per-worker concurrency cap. An idle
    worker always admits, so no request waits forever for a fence it can never fit.
    """

    name: ClassVar[str] = "statera"
    Params: ClassVar[type[BaseModel]] = StateraParams

    def __init__(self, params: BaseModel | None = None) -> None:
        super().__init__(params)
        assert isinstance(self.params, StateraParams)
        self._cfg: StateraParams = self.params
        p = self._cfg
        try:
            self.loop = DualLoop(
                u_low=p.u_low, u_high=p.u_high, period_s=p.period_s, window=p.window,
                budget_min=p.budget_min, budget_max=p.budget_max, eta_b=p.eta_b,
                n_min=p.n_min, n_max=p.n_max, eta_n=p.eta_n,
            )  # fmt: skip
        except ValueError as e:
            raise ValueError(f"statera: {e}") from None
        self.bound = ConformalLengthBound(p.epsilon, p.error_window, gamma=p.gamma)

    @property
    def budget(self) -> float:
        return self.loop.budget

    @property
    def n_run(self) -> float:
        return self.loop.n_run

    def _p(self) -> StateraParams:
        return self._cfg

    def reserve(self, job: Job) -> int:
        return job.n_in + self.bound.upper(job)

    def fence(self, worker: WorkerView) -> float:
        return worker.kv_tokens * (1.0 - self._p().delta_frag) * self.budget

    def cap(self, worker: WorkerView) -> int:
        return max(1, min(worker.max_num_seqs, math.floor(self.n_run)))

    def has_room(self, worker: WorkerView, now: float) -> bool:
        if worker.inflight == 0:
            return True
        return worker.inflight < self.cap(worker) and worker.inflight_tokens < self.fence(worker)

    def admit(self, job: Job, worker: WorkerView, now: float) -> bool:
        if worker.inflight == 0:
            return True
        if worker.inflight >= self.cap(worker):
            return False
        return worker.inflight_tokens + self.reserve(job) <= self.fence(worker)

    def utilisation(self, workers: Sequence[WorkerView]) -> float | None:
        live = [w for w in workers if w.healthy]
        if not live:
            return None
        if self._p().utilisation == "kv_usage":
            return sum(w.kv_usage for w in live) / len(live)
        full = [w.kv_tokens * (1.0 - self._p().delta_frag) for w in live]
        return sum(w.inflight_tokens / max(f, 1.0) for w, f in zip(live, full, strict=True)) / len(
            live
        )

    def observe(self, now: float, workers: Sequence[WorkerView]) -> None:
        if not self.loop.due(now):
            return
        u = self.utilisation(workers)
        if u is not None:
            self.loop.update(u, now)

    def on_finish(self, job: Job, outcome: Outcome, now: float) -> None:
        if outcome.status == "ok":
            self.bound.observe(job.n_in, job.expected_out, outcome.n_out)

    def snapshot(self) -> dict[str, Any]:
        return (
            super().snapshot()
            | self.loop.snapshot()
            | {
                "length_errors": self.bound.to_json(),
                "length_coverage": self.bound.coverage(),
                "length_alpha": self.bound.alphas(),
            }
        )

    def restore(self, snapshot: dict[str, Any]) -> None:
        self.loop.restore(snapshot)
        self.bound.load_json(snapshot["length_errors"])
        self.bound.load_coverage(snapshot.get("length_coverage"))
        self.bound.load_alphas(snapshot.get("length_alpha"))
