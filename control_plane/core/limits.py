"""Execution limits: per-worker caps on what Arbiter dispatches, on top of any admission plug-in.

The meta-controller's execution loop (`control.execution`) tunes them; the dispatcher enforces
them. They control only what Arbiter sends to a worker — the engine is never patched.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from control_plane.core.job import Job
from control_plane.core.worker_view import WorkerView


@dataclass
class ExecutionLimits:
    """Caps applied to every worker alike; None = no cap.

    Rule: a worker takes one more job only while it stays under every cap set:
    - `prefill_tokens`: prompt tokens of its requests still before their first output token,
      this job's included (long prefills sharing a batch are what stretch everyone's TPOT);
    - `n_run`: requests in flight;
    - `token_budget`: reserved KV tokens (prompt + predicted output) as a fraction of its KV
      capacity.
    Guarantee: a worker with nothing in flight always admits (a prompt larger than the prefill
    cap still runs, alone), and a worker with no prefill in flight passes the prefill cap, so
    no request waits forever for a cap it can never fit.
    """

    prefill_tokens: int | None = None
    n_run: int | None = None
    token_budget: float | None = None

    @property
    def off(self) -> bool:
        return self.prefill_tokens is None and self.n_run is None and self.token_budget is None

    def has_room(self, worker: WorkerView) -> bool:
        """Job-independent pre-check: False means no job would pass."""
        if worker.inflight == 0:
            return True
        if self.n_run is not None and worker.inflight >= self.n_run:
            return False
        if self.token_budget is not None:
            return worker.inflight_tokens < self.token_budget * worker.kv_tokens
        return True

    def admit(self, job: Job, worker: WorkerView, reserved: int) -> bool:
        """True when `worker` stays under every cap with `job` (reserving `reserved` tokens)."""
        if worker.inflight == 0:
            return True
        if self.n_run is not None and worker.inflight >= self.n_run:
            return False
        cap, prefill = self.prefill_tokens, worker.prefill_tokens
        if cap is not None and prefill > 0 and prefill + job.n_in > cap:
            return False
        if self.token_budget is not None:
            return worker.inflight_tokens + reserved <= self.token_budget * worker.kv_tokens
        return True

    def to_json(self) -> dict[str, Any]:
        return {
            "prefill_tokens": self.prefill_tokens,
            "n_run": self.n_run,
            "token_budget": self.token_budget,
        }

    @classmethod
    def from_json(cls, data: Any) -> ExecutionLimits:
        """Limits from `to_json`; unknown or malformed fields are left uncapped."""
        if not isinstance(data, dict):
            return cls()
        prefill, n_run, budget = (data.get(k) for k in ("prefill_tokens", "n_run", "token_budget"))
        return cls(
            prefill_tokens=prefill if isinstance(prefill, int) and prefill > 0 else None,
            n_run=n_run if isinstance(n_run, int) and n_run > 0 else None,
            token_budget=float(budget) if isinstance(budget, int | float) and budget > 0 else None,
        )
