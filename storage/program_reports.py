"""Program-level metrics (Kairos §5.7) of the request history: what a multi-agent
application's user feels, per application (`tenant/app`).

Definitions — the same as the simulator's and the bench's (`control_plane/sim/program_metrics`),
so a live period and a simulated run of the same scenario are measured alike:

- a *workflow* is the set of request rows sharing a `workflow` id within one `tenant/app`
  (rows without one are not programs);
- it is *completed* when every call it issued ended `ok` with a finish time; the others are
  counted in `workflows` but in no statistic;
- end-to-end latency = its last call's `finished_at` − its first call's `arrival` (seconds);
- program-level token latency = that latency / the output tokens all its calls generated
  (seconds per token; a workflow that generated none divides by 1);
- calls per workflow, and mean, P90, P95, P99 of both latencies, are over completed workflows;
  the percentiles interpolate linearly between ranks (numpy's default, as the simulator) —
  unlike the fairness report's nearest-rank request percentiles.

A workflow belongs to a report period by its first call's arrival; all its calls count, even
those arriving after the period ends.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple

import numpy as np

QUANTILES = (90, 95, 99)


class WorkflowTotals(NamedTuple):
    """One workflow, summed in SQL over its calls."""

    tenant: str
    app: str
    workflow: str
    calls: int
    unfinished: int
    """Calls that did not end `ok` or have no finish time."""
    first_arrival: float
    last_finished: float | None
    n_out: int


@dataclass(frozen=True, slots=True)
class LatencyStats:
    """Mean and P90/P95/P99 (linear interpolation) of one latency; None when nothing completed."""

    mean: float | None
    p90: float | None
    p95: float | None
    p99: float | None


@dataclass(frozen=True, slots=True)
class AppPrograms:
    """One application's workflows over a period: how many, how many completed, and over the
    completed ones the calls per workflow and both latency distributions (seconds)."""

    tenant: str
    app: str
    workflows: int
    completed: int
    calls_per_workflow: float | None
    e2e_s: LatencyStats
    token_latency_s: LatencyStats

    @property
    def key(self) -> str:
        """'tenant/app' (names never contain '/')."""
        return f"{self.tenant}/{self.app}"


@dataclass(frozen=True, slots=True)
class ProgramReport:
    """Per application, ordered by key, the workflows whose first call arrived in
    [since, until)."""

    since: float
    until: float
    apps: tuple[AppPrograms, ...]

    def to_json(self) -> dict[str, Any]:
        """Plain JSON: the period and one entry per application with its `key`."""
        return {
            "since": self.since,
            "until": self.until,
            "data": [{"key": a.key, **asdict(a)} for a in self.apps],
        }


def latency_stats(values: Sequence[float]) -> LatencyStats:
    """Mean and P90/P95/P99 of `values` (all None when empty)."""
    if not values:
        return LatencyStats(None, None, None, None)
    arr = np.asarray(values, dtype=np.float64)
    p90, p95, p99 = (float(np.percentile(arr, q)) for q in QUANTILES)
    return LatencyStats(float(arr.mean()), p90, p95, p99)


def _completed(w: WorkflowTotals) -> bool:
    return w.unfinished == 0 and w.last_finished is not None


def _app(tenant: str, app: str, workflows: Sequence[WorkflowTotals]) -> AppPrograms:
    done = [w for w in workflows if _completed(w)]
    e2e = [(w.last_finished or 0.0) - w.first_arrival for w in done]
    per_token = [t / max(w.n_out, 1) for t, w in zip(e2e, done, strict=True)]
    return AppPrograms(
        tenant=tenant,
        app=app,
        workflows=len(workflows),
        completed=len(done),
        calls_per_workflow=float(np.mean([w.calls for w in done])) if done else None,
        e2e_s=latency_stats(e2e),
        token_latency_s=latency_stats(per_token),
    )


def program_report(
    workflows: Iterable[WorkflowTotals], since: float, until: float
) -> ProgramReport:
    """Reduce per-workflow totals to per-application figures (see the module docstring)."""
    per_app: dict[tuple[str, str], list[WorkflowTotals]] = defaultdict(list)
    for w in workflows:
        per_app[(w.tenant, w.app)].append(w)
    keys = sorted(per_app, key=lambda k: f"{k[0]}/{k[1]}")
    return ProgramReport(since, until, tuple(_app(t, a, per_app[(t, a)]) for t, a in keys))
