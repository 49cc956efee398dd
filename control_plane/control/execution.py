"""Execution control: the meta-controller's second loop, on what Arbiter dispatches to each
worker (H-MAS §4.4 "tunes execution", Statera §4.5; docs/algorithms.md §18).

Two levers, both `core.limits.ExecutionLimits` enforced by the dispatcher:
- a per-worker cap on prompt tokens in prefill, tightened when requests are lost to TPOT and
  relaxed when they are lost to TTFT — long prefills sharing a batch stretch every running
  request's TPOT whatever the order, so only what is dispatched can protect it;
- Statera's dual loop on KV utilisation: a token budget (P) and a concurrency cap (I).
No I/O; `now` comes in; the simulator and the live scheduler run the same object.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from control_plane.control.views import ShortView
from control_plane.core.dual_loop import DualLoop
from control_plane.core.limits import ExecutionLimits
from control_plane.core.worker_view import WorkerView


class ExecutionParams(BaseModel):
    """Knobs of the execution loop (the `execution` field of the `auto` policy's params)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    period_s: float = Field(5.0, gt=0)
    """How often the prefill cap moves; it reads the short view, whose window is the
    controller's `V_short` window (5 s)."""
    min_completions: int = Field(5, ge=1)
    """Completions a period needs before the prefill cap moves on its evidence."""
    loss_target: float = Field(0.05, ge=0, le=1)
    """Share of completions lost to TPOT alone below which the cap does not tighten."""
    prefill_min: int = Field(1024, ge=1)
    prefill_max: int = Field(16384, ge=1)
    """The first value when tightening from uncapped; relaxing past it removes the cap."""
    tighten: float = Field(0.5, gt=0, lt=1)
    relax: float = Field(1.25, gt=1)
    u_low: float = Field(0.7, ge=0, le=1)
    u_high: float = Field(0.9, ge=0, le=1)
    budget_min: float = Field(0.5, gt=0, le=1)
    n_min: int = Field(4, ge=1)
    n_max: int = Field(256, ge=1)

    @model_validator(mode="after")
    def _ordered(self) -> ExecutionParams:
        if self.prefill_min > self.prefill_max:
            raise ValueError("execution: prefill_min must not exceed prefill_max")
        if self.u_low > self.u_high or self.n_min > self.n_max:
            raise ValueError("execution: each lower bound must not exceed its upper bound")
        return self


@dataclass(frozen=True, slots=True)
class LimitChange:
    """One move of the limits: when, to what, and why (the console's timeline)."""

    t: float
    limits: dict[str, Any]
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"t": self.t, "limits": self.limits, "reason": self.reason}


@dataclass
class ExecutionControl:
    """Tunes `ExecutionLimits` every cycle it is due.

    Prefill cap (every `period_s`, on the short view of that window, once it holds
    `min_completions` ends): with `tpot_only` the share of ends that met TTFT but missed TPOT
    and `ttft_only` the converse, tighten (×`tighten`, from `prefill_max` when uncapped, not
    below `prefill_min`) when `tpot_only > loss_target` and `tpot_only > ttft_only`; relax
    (×`relax`, uncapped past `prefill_max`) when `ttft_only > tpot_only` or both are below
    `loss_target`; hold otherwise. Dual loop (every 0.5 s, on the mean scraped KV usage of
    healthy workers): `n_run` and `token_budget` as `DualLoop` documents, each uncapped while
    at its loosest. Guarantee: limits only ever move within their knobs, and `changes` keeps
    the newest `max_records` moves.
    """

    params: ExecutionParams = field(default_factory=ExecutionParams)
    limits: ExecutionLimits = field(default_factory=ExecutionLimits)
    changes: list[LimitChange] = field(default_factory=list)
    max_records: int = 1000
    loop: DualLoop = field(init=False)
    _next_at: float | None = None

    def __post_init__(self) -> None:
        p = self.params
        self.loop = DualLoop(
            u_low=p.u_low, u_high=p.u_high, budget_min=p.budget_min, n_min=p.n_min, n_max=p.n_max
        )

    def step(
        self,
        now: float,
        short: Callable[[], ShortView],
        workers: Callable[[], Sequence[WorkerView]],
    ) -> bool:
        """Move the limits when due; True when they changed. `short` and `workers` are only
        called when a loop is due (they cost a pass over the window and the workers)."""
        loop_due = self.loop.due(now)
        if not self.params.enabled or not (
            loop_due or self._next_at is None or now >= self._next_at
        ):
            return False
        before = self.limits.to_json()
        reason = self._loop(now, workers) if loop_due else None
        if self._next_at is None:
            self._next_at = now + self.params.period_s
        elif now >= self._next_at:
            self._next_at = now + self.params.period_s
            reason = self._prefill(short()) or reason
        after = self.limits.to_json()
        if after == before:
            return False
        self.changes.append(LimitChange(now, after, reason or "dual loop"))
        del self.changes[: -self.max_records]
        return True

    def _loop(self, now: float, workers: Callable[[], Sequence[WorkerView]]) -> str | None:
        live = [w for w in workers() if w.healthy]
        if not live:
            return None
        u = sum(w.kv_usage for w in live) / len(live)
        self.loop.update(u, now)
        n_run = math.floor(self.loop.n_run)
        self.limits.n_run = None if n_run >= self.params.n_max else n_run
        budget = self.loop.budget
        self.limits.token_budget = None if budget >= self.loop.budget_max else budget
        return f"dual loop: KV usage {u:.2f}"

    def _prefill(self, short: ShortView) -> str | None:
        p = self.params
        if short.completions < p.min_completions:
            return None
        tpot_only, ttft_only = short.tpot_only_rate, short.ttft_only_rate
        cap = self.limits.prefill_tokens
        why = f"TPOT-only losses {tpot_only:.2f}, TTFT-only {ttft_only:.2f}"
        if tpot_only > p.loss_target and tpot_only > ttft_only:
            tighter = p.prefill_max if cap is None else max(p.prefill_min, int(cap * p.tighten))
            self.limits.prefill_tokens = tighter
            return f"tighten prefill: {why}"
        if cap is not None and (ttft_only > tpot_only or tpot_only <= p.loss_target):
            relaxed = int(cap * p.relax)
            self.limits.prefill_tokens = None if relaxed > p.prefill_max else relaxed
            return f"relax prefill: {why}"
        return None

    def snapshot(self) -> dict[str, Any]:
        return {"limits": self.limits.to_json(), "loop": self.loop.snapshot()}

    def restore(self, data: Any) -> None:
        if not isinstance(data, dict):
            return
        self.limits = ExecutionLimits.from_json(data.get("limits"))
        loop = data.get("loop")
        if isinstance(loop, dict):
            with contextlib.suppress(KeyError, TypeError, ValueError):
                self.loop.restore(loop)  # a malformed loop state starts loose again
