"""A clock-agnostic, deterministic model of vLLM v1's continuous-batching engine.

The engine never reads a clock: the caller tells it the time. ``add``/``abort`` take effect at
the next step; ``advance(now)`` runs every step that ends at or before ``now`` and returns their
``StepResult``s in order; ``next_event_time()`` says when something happens next (the end of the
step in progress, or when the next step would start), or None when there is nothing to do. The
same object therefore drives a wall-clock HTTP worker (sleep until ``next_event_time``) and a
discrete-event simulator (schedule an event at it).

Timing rules:
- Steps run back to back while there is work; an idle engine that receives a request at ``t``
  starts its next step at ``t``.
- A step's schedule is fixed when it starts. The step starting at ``s`` is formed by the first
  ``advance(t)`` with ``t >= s``, or by an ``add``/``abort`` at ``t > s`` (it was already under
  way). So a request added at exactly ``s`` joins it if added before that ``advance`` call.
- A step lasts ``LatencyModel.step_time(...)`` times a log-normal jitter factor with mean 1 and
  coefficient of variation ``jitter_cv`` drawn from ``random.Random(seed)``: the same inputs and
  seed give the same trace.

Batching decisions are vLLM v1's (see ``batch_scheduler``). An aborted request frees its KV
blocks at once and emits nothing more, even from the step in progress.
"""

from __future__ import annotations

import math
import random

from workers.engine.batch_scheduler import BatchScheduler
from workers.engine.plan import RUNNING, WAITING, Plan
from workers.engine.profile import LatencyModel
from workers.engine.step import (
    EngineConfig,
    EngineRequest,
    RequestState,
    StepResult,
    TokenEvent,
)

__all__ = [
    "Engine",
    "EngineConfig",
    "EngineRequest",
    "RequestState",
    "StepResult",
    "TokenEvent",
]


class Engine:
    """vLLM-like engine in caller-supplied time (see the module docstring for the contract)."""

    def __init__(self, latency: LatencyModel, config: EngineConfig, seed: int = 0) -> None:
        self.latency = latency
        self.config = config
        self._sched = BatchScheduler(config)
        self._rng = random.Random(seed)
        cv = latency.jitter_cv
        self._sigma = math.sqrt(math.log1p(cv * cv)) if cv > 0 else 0.0
        self._plan: Plan | None = None  # the step in progress
        self._plan_start = 0.0
        self._plan_end = 0.0
        self._ready_at: float | None = None  # start of the next step when none is in progress
        self._last_end = -math.inf
        self._done: list[StepResult] = []  # steps completed while catching up in add/abort

    # inputs --------------------------------------------------------------------------------
    def add(self, req: EngineRequest, now: float) -> None:
        """Queue a request; raises ValueError if its id is in use or it can never fit the KV."""
        self._catch_up(now, inclusive=False)
        self._sched.add(req)
        if self._plan is None and self._ready_at is None:
            self._ready_at = max(now, self._last_end)

    def abort(self, req_id: str, now: float) -> bool:
        """Drop a request and free its KV blocks now; True if the engine knew it."""
        self._catch_up(now, inclusive=False)
        found = self._sched.abort(req_id, self._plan)
        if found and self._plan is None and not self._sched.has_work():
            self._ready_at = None
        return found

    def advance(self, now: float) -> list[StepResult]:
        """Run every step that ends at or before ``now``; their results, oldest first."""
        self._catch_up(now, inclusive=True)
        done, self._done = self._done, []
        return done

    def next_event_time(self) -> float | None:
        """End of the step in progress, else when the next step would start, else None (idle)."""
        if self._plan is not None:
            return self._plan_end
        return self._ready_at

    # time ----------------------------------------------------------------------------------
    def _catch_up(self, now: float, inclusive: bool) -> None:
        while True:
            if self._plan is None:
                start = self._ready_at
                if start is None or start > now or (start == now and not inclusive):
                    return
                self._start_step(start)
            end = self._plan_end
            if end > now or (end == now and not inclusive):
                return
            self._finish_step()

    def _start_step(self, start: float) -> None:
        plan = self._sched.plan()
        if not (plan.events or plan.prefill_tokens or plan.preempted):
            raise RuntimeError("engine invariant broken: work queued but nothing schedulable")
        duration = self.latency.step_time(plan.prefill_tokens, plan.decode_seqs, plan.decode_ctx)
        if self._sigma > 0.0 and duration > 0.0:
            sigma = self._sigma
            duration *= math.exp(self._rng.gauss(-0.5 * sigma * sigma, sigma))
        self._plan = plan
        self._plan_start = start
        self._plan_end = start + duration
        self._ready_at = None

    def _finish_step(self) -> None:
        plan = self._plan
        assert plan is not None
        tokens = self._sched.complete(plan)
        end = self._plan_end
        self._done.append(
            StepResult(
                self._plan_start,
                end,
                tokens,
                tuple(plan.preempted),
                plan.prefill_tokens,
                plan.decode_seqs,
            )
        )
        self._plan = None
        self._last_end = end
        self._ready_at = end if self._sched.has_work() else None

    # read-only stats -----------------------------------------------------------------------
    @property
    def num_running(self) -> int:
        return len(self._sched.running)

    @property
    def num_waiting(self) -> int:
        return self._sched.num_waiting

    @property
    def kv_usage(self) -> float:
        """Fraction (0..1) of KV blocks in use."""
        s = self._sched
        return (s.total_blocks - s.free_blocks) / s.total_blocks

    @property
    def kv_capacity_tokens(self) -> int:
        """Tokens the KV cache holds: ``(kv_tokens // block_size) * block_size``."""
        return self._sched.total_blocks * self._sched.block_size

    @property
    def num_preemptions(self) -> int:
        return self._sched.num_preemptions

    @property
    def prompt_tokens_total(self) -> int:
        """Prompt tokens of requests that produced their first token (recomputes not counted)."""
        return self._sched.prompt_tokens_total

    @property
    def generation_tokens_total(self) -> int:
        return self._sched.generation_tokens_total

    def request_state(self, req_id: str) -> RequestState | None:
        """Snapshot of a waiting or running request; None once finished, aborted or unknown."""
        s = self._sched.seqs.get(req_id)
        if s is None:
            return None
        in_flight = self._plan is not None and s.last_step == self._plan.number
        pending = 1 if in_flight and s.state == RUNNING and s.last_kind else 0
        return RequestState(
            id=s.id,
            status="waiting" if s.state == WAITING else "running",
            n_in=s.n_in,
            n_out=s.n_out,
            generated=s.generated - pending,
            computed_tokens=s.computed - (s.last_n if in_flight else 0),
            kv_blocks=s.blocks,
            preemptions=s.preemptions,
        )
