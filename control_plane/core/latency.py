"""Service-time and deadline estimates used by the SLO-driven policies (docs/algorithms.md §17).

`T_tot = t̂_ttft + t̂_tpot · l_pred`, `D_r = a_r + SLO_ttft + SLO_tpot · l_pred`. The default
model of `PolicyContext.latency` is `latency_fit.FittedLatency`, fitted online from served
requests with `LinearLatency`'s constants until it has data; policies compute keys once, at
push time, from the coefficients of that moment.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

from control_plane.core.job import Job, Outcome


class LatencyModel(Protocol):
    """Predicts a request's time to first token and time per output token, in seconds, and
    may learn from served requests (`observe`; state kept through `snapshot`/`restore`)."""

    def ttft(self, job: Job) -> float: ...

    def tpot(self, job: Job) -> float: ...

    def observe(self, job: Job, outcome: Outcome) -> None: ...

    def snapshot(self) -> Any: ...

    def restore(self, data: Any) -> None: ...


@dataclass
class LinearLatency:
    """`t̂_ttft = a + b · n_in`, `t̂_tpot = c + d · running_batch` (engine-profile defaults)."""

    a: float = 0.05
    b: float = 2e-4
    c: float = 0.02
    d: float = 5e-4
    running_batch: float = 16.0

    def ttft(self, job: Job) -> float:
        return self.a + self.b * job.n_in

    def tpot(self, job: Job) -> float:
        return self.c + self.d * self.running_batch

    def observe(self, job: Job, outcome: Outcome) -> None:
        """Fixed coefficients: nothing to learn."""

    def snapshot(self) -> Any:
        return None

    def restore(self, data: Any) -> None:
        """Fixed coefficients: nothing to restore."""


def total_time(job: Job, model: LatencyModel) -> float:
    """Predicted service time `T_tot` of `job` (seconds), with `l_pred = job.expected_out`."""
    return model.ttft(job) + model.tpot(job) * job.expected_out


def deadline(job: Job, default_s: float | None = None) -> float:
    """Absolute deadline `D_r`; the tighter of the TTFT/TPOT and the end-to-end targets.

    A job without any target gets `arrival + default_s`, or +inf when no default is set (it
    then sorts after every job with a deadline, in arrival order).
    """
    slo = job.slo
    candidates: list[float] = []
    if slo.ttft_s is not None or slo.tpot_s is not None:
        per_token = (slo.tpot_s or 0.0) * job.expected_out
        candidates.append(job.arrival + (slo.ttft_s or 0.0) + per_token)
    if slo.e2e_s is not None:
        candidates.append(job.arrival + slo.e2e_s)
    if candidates:
        return min(candidates)
    return job.arrival + default_s if default_s is not None else math.inf
