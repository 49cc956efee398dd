"""QoS views of the pool: what the meta-controller perceives (H-MAS §4.3, docs/algorithms.md §18).

`ViewKeeper` is fed every arrival and every end by the scheduler core (both clocks) and keeps
the last `long_s` seconds of them; `short(now, …)` and `long(now, …)` summarise that history.
Only what a live scheduler sees goes in: prompt length, predicted output and service time at
arrival, and the measured outcome at the end — never a true output length in advance.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from control_plane.core.job import Job, Outcome
from control_plane.core.latency import LatencyModel, total_time


@dataclass(frozen=True, slots=True)
class _Arrival:
    t: float
    tenant: str
    n_in: int
    out: int
    t_tot: float


@dataclass(frozen=True, slots=True)
class _End:
    t: float
    tenant: str
    ok: bool
    has_slo: bool
    violated: bool
    ttft_miss: bool
    tpot_miss: bool
    ttft_s: float | None


@dataclass(frozen=True, slots=True)
class ShortView:
    """`V_short`: the pool now and over the last `short_s` seconds."""

    t: float
    queued: int
    inflight: int
    violation_rate: float
    ttft_mean_s: float | None
    completions: int
    ttft_only_rate: float = 0.0
    """Ends with an SLO that met TPOT but missed TTFT, over all ends with an SLO."""
    tpot_only_rate: float = 0.0
    """Ends with an SLO that met TTFT but missed TPOT, over all ends with an SLO."""


@dataclass(frozen=True, slots=True)
class LongView:
    """`V_long`: the last `long_s` seconds, for the policy choice."""

    t: float
    span_s: float
    arrival_rps: float
    completion_rps: float
    goodput_rps: float
    prompt_mean: float
    prompt_cv: float
    out_mean: float
    out_cv: float
    t_tot_cv: float
    long_fraction: float
    """Arrivals whose predicted service time exceeds twice the window's median."""
    tenants: int
    jain_service: float
    """Jain's index, over the tenants with arrivals in the window, of each one's completions
    per arrival: 1 when every tenant is served in proportion to what it asks."""
    slo_share: float
    violation_rate: float
    ttft_miss_rate: float
    tpot_miss_rate: float
    ttft_p99_s: float | None
    queued: int
    queue_growth_rps: float
    """Change of the queue over the window, per second."""

    def to_json(self) -> dict[str, Any]:
        return {k: _finite(v) for k, v in asdict(self).items()}


def _finite(v: Any) -> Any:
    return None if isinstance(v, float) and not math.isfinite(v) else v


def _cv(values: list[float]) -> float:
    if len(values) < 2:
        return 0.0
    arr = np.asarray(values, dtype=float)
    mean = float(arr.mean())
    return float(arr.std() / mean) if mean > 0 else 0.0


class ViewKeeper:
    """The recent arrivals and ends the views are computed from.

    Guarantee: memory is bounded by the events of the last `long_s` seconds; a view is a pure
    function of those events and the counts passed in.
    """

    def __init__(self, latency: LatencyModel, long_s: float = 30.0, short_s: float = 5.0) -> None:
        self.latency = latency
        self.long_s = long_s
        self.short_s = short_s
        self._arrivals: deque[_Arrival] = deque()
        self._ends: deque[_End] = deque()
        self._queue_at: deque[tuple[float, int]] = deque()

    def on_arrival(self, job: Job, now: float) -> None:
        t_tot = total_time(job, self.latency)
        self._arrivals.append(_Arrival(now, job.tenant, job.n_in, job.expected_out, t_tot))

    def on_finish(self, job: Job, outcome: Outcome, now: float) -> None:
        slo = job.slo
        ok = outcome.status == "ok"
        ttft_miss = slo.ttft_s is not None and (
            not ok or (outcome.ttft_s is not None and outcome.ttft_s > slo.ttft_s)
        )
        tpot_miss = slo.tpot_s is not None and (
            not ok or (outcome.tpot_s is not None and outcome.tpot_s > slo.tpot_s)
        )
        self._ends.append(
            _End(
                now,
                job.tenant,
                ok,
                slo.is_set(),
                outcome.violated(slo),
                ttft_miss,
                tpot_miss,
                outcome.ttft_s,
            )
        )

    def note_queue(self, now: float, queued: int) -> None:
        self._queue_at.append((now, queued))
        self._trim(now)

    def queue_growth(self, now: float, queued: int) -> float:
        """Change of the queue over the window, per second (0 with no history)."""
        if not self._queue_at:
            return 0.0
        t0, q0 = self._queue_at[0]
        return (queued - q0) / max(now - t0, 1e-9) if now > t0 else 0.0

    def short(self, now: float, queued: int, inflight: int) -> ShortView:
        recent = [e for e in self._ends if e.t > now - self.short_s]
        with_slo = [e for e in recent if e.has_slo]
        ttfts = [e.ttft_s for e in recent if e.ttft_s is not None]
        return ShortView(
            t=now,
            queued=queued,
            inflight=inflight,
            violation_rate=sum(e.violated for e in with_slo) / len(with_slo) if with_slo else 0.0,
            ttft_mean_s=float(np.mean(ttfts)) if ttfts else None,
            completions=len(recent),
            ttft_only_rate=_share(with_slo, lambda e: e.ttft_miss and not e.tpot_miss),
            tpot_only_rate=_share(with_slo, lambda e: e.tpot_miss and not e.ttft_miss),
        )

    def long(self, now: float, queued: int) -> LongView:
        self._trim(now)
        arrivals, ends = list(self._arrivals), list(self._ends)
        oldest = self._queue_at[0] if self._queue_at else (now, queued)
        span = max(min(self.long_s, now - oldest[0]), 1e-9)
        growth = self.queue_growth(now, queued)
        t_tots = [a.t_tot for a in arrivals]
        median = float(np.median(t_tots)) if t_tots else 0.0
        with_slo = [e for e in ends if e.has_slo]
        ttfts = [e.ttft_s for e in ends if e.ttft_s is not None]
        good = sum(e.ok and not e.violated for e in ends)
        return LongView(
            t=now,
            span_s=span,
            arrival_rps=len(arrivals) / span,
            completion_rps=len(ends) / span,
            goodput_rps=good / span,
            prompt_mean=float(np.mean([a.n_in for a in arrivals])) if arrivals else 0.0,
            prompt_cv=_cv([float(a.n_in) for a in arrivals]),
            out_mean=float(np.mean([a.out for a in arrivals])) if arrivals else 0.0,
            out_cv=_cv([float(a.out) for a in arrivals]),
            t_tot_cv=_cv(t_tots),
            long_fraction=(sum(t > 2.0 * median for t in t_tots) / len(t_tots) if t_tots else 0.0),
            tenants=len({a.tenant for a in arrivals}),
            jain_service=self._jain(arrivals, ends),
            slo_share=len(with_slo) / len(ends) if ends else 0.0,
            violation_rate=_rate(with_slo, "violated"),
            ttft_miss_rate=_rate(with_slo, "ttft_miss"),
            tpot_miss_rate=_rate(with_slo, "tpot_miss"),
            ttft_p99_s=float(np.percentile(ttfts, 99)) if ttfts else None,
            queued=queued,
            queue_growth_rps=growth,
        )

    @staticmethod
    def _jain(arrivals: list[_Arrival], ends: list[_End]) -> float:
        asked: dict[str, float] = {}
        for a in arrivals:
            asked[a.tenant] = asked.get(a.tenant, 0.0) + 1.0
        if len(asked) < 2:
            return 1.0
        served = dict.fromkeys(asked, 0.0)
        for e in ends:
            if e.tenant in served and e.ok:
                served[e.tenant] += 1.0
        xs = [min(1.0, served[t] / asked[t]) for t in sorted(asked)]
        squares = sum(x * x for x in xs)
        return (sum(xs) ** 2) / (len(xs) * squares) if squares > 0 else 1.0

    def _trim(self, now: float) -> None:
        horizon = now - self.long_s
        for q in (self._arrivals, self._ends):
            while q and q[0].t <= horizon:
                q.popleft()
        while len(self._queue_at) > 1 and self._queue_at[1][0] <= horizon:
            self._queue_at.popleft()


def _share(ends: list[_End], test: Callable[[_End], bool]) -> float:
    return sum(test(e) for e in ends) / len(ends) if ends else 0.0


def _rate(ends: list[_End], field: str) -> float:
    return sum(getattr(e, field) for e in ends) / len(ends) if ends else 0.0
