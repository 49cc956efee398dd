"""The soak's verdict: memory growth per process after warm-up, errors, restarts.

Growth of a process is `(end − baseline) / baseline` of its RSS, where the baseline is the
median of the first `window` samples taken at or after the warm-up and the end is the median
of the last `window` samples. Medians, because single samples of a steady process jitter
(Redis's RSS moves by ~8 % around an AOF rewrite and its `used_memory` by as much as the
population of expiring request hashes): a leak shows as a level that keeps rising, which the
median of the last few minutes follows and one sample's spike does not fake. A process passes
under `max_growth` (10 %). The soak passes when every process and Redis's `used_memory`
pass, no request failed (explicit error, hung or cut short), no process was restarted (its
pid stayed the same), and the load was held: at least `MIN_HELD` (95 %) of the planned arrivals
were sent. An arrival not sent (the generator more than a second late, or too many requests in
flight) is not a request error — nothing reached the deployment — but too many of them mean
the deployment was measured at a lower load than planned.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from rich.table import Table

from control_plane.bench.footprint import Footprint

MAX_GROWTH = 0.10
MIN_HELD = 0.95
NOT_SENT = ("not_sent_generator_behind", "not_sent_client_backlog")
WINDOW = 3
"""Samples per median (3 one-minute samples by default)."""


@dataclass(frozen=True)
class Sample:
    """What the soak saw at `t_s` seconds into the driven phase."""

    t_s: float
    footprint: Footprint
    outcomes: dict[str, int]
    in_flight: int = 0
    """Requests sent and not yet ended: growing from sample to sample means falling behind."""
    sent: int = 0
    """Requests sent so far: the load the deployment really got, minute by minute."""

    def as_dict(self) -> dict[str, Any]:
        f = self.footprint
        return {
            "t_s": round(self.t_s, 1),
            "rss_kb": f.rss_kb,
            "pids": f.pids,
            "redis_used_memory": f.redis_used_memory,
            "outcomes": self.outcomes,
            "in_flight": self.in_flight,
            "sent": self.sent,
        }


@dataclass
class Verdict:
    baseline_t_s: float | None = None
    """Time of the first sample of the baseline window."""
    end_t_s: float | None = None
    """Time of the first sample of the end window."""
    baseline: dict[str, float] = field(default_factory=dict)
    end: dict[str, float] = field(default_factory=dict)
    """Medians per process (KiB of RSS; bytes for `redis used_memory`)."""
    growth: dict[str, float] = field(default_factory=dict)
    grown: list[str] = field(default_factory=list)
    restarted: list[str] = field(default_factory=list)
    failed_requests: int = 0
    unsent: int = 0
    held: float = 0.0
    """Share of the planned arrivals that were sent."""
    passed: bool = False


def _growth(first: float, last: float) -> float:
    return (last - first) / first if first else 0.0


def _level(samples: list[Sample], name: str) -> float | None:
    """Median of `name` over `samples` (KiB of RSS, or bytes of Redis `used_memory`)."""
    if name == USED:
        values = [s.footprint.redis_used_memory for s in samples]
    else:
        values = [s.footprint.rss_kb.get(name) for s in samples]
    present = [float(v) for v in values if v is not None]
    return statistics.median(present) if present else None


USED = "redis used_memory"


def verdict(
    samples: list[Sample],
    warmup_s: float,
    outcomes: dict[str, int],
    max_growth: float = MAX_GROWTH,
    window: int = WINDOW,
) -> Verdict:
    """Compare the median of the last `window` samples with that of the first `window` after
    warm-up; `outcomes` are the final counts of every request (after the last ones in flight
    ended). Fewer than `2 × window` samples after warm-up never pass: the windows would
    overlap."""
    v = Verdict()
    after = [s for s in samples if s.t_s >= warmup_s]
    if len(after) < 2 * window:
        return v
    head, tail = after[:window], after[-window:]
    v.baseline_t_s, v.end_t_s = head[0].t_s, tail[0].t_s
    names = [*sorted(head[0].footprint.rss_kb), USED]
    for name in names:
        base, end = _level(head, name), _level(tail, name)
        if base is not None and end is not None:
            v.baseline[name], v.end[name] = base, end
            v.growth[name] = _growth(base, end)
    v.grown = sorted(n for n, g in v.growth.items() if g >= max_growth)
    last = samples[-1]
    first_pids = samples[0].footprint.pids
    v.restarted = sorted(
        n for n, pid in first_pids.items() if last.footprint.pids.get(n, pid) != pid
    )
    v.restarted += sorted(set(first_pids) - set(last.footprint.pids))
    v.failed_requests = sum(n for k, n in outcomes.items() if k != "ok" and k not in NOT_SENT)
    v.unsent = sum(outcomes.get(k, 0) for k in NOT_SENT)
    planned = sum(outcomes.values())
    v.held = 1.0 - v.unsent / planned if planned else 0.0
    held = v.held >= MIN_HELD
    v.passed = not v.grown and not v.restarted and v.failed_requests == 0 and held
    return v


def sample_line(s: Sample) -> str:
    """One line per sample: time, requests so far, RSS per process, Redis used_memory."""
    minutes, seconds = divmod(int(s.t_s), 60)
    ok = s.outcomes.get("ok", 0)
    failed = sum(n for k, n in s.outcomes.items() if k != "ok" and k not in NOT_SENT)
    unsent = sum(s.outcomes.get(k, 0) for k in NOT_SENT)
    sizes = " ".join(f"{n} {kb / 1024:.1f}" for n, kb in sorted(s.footprint.rss_kb.items()))
    used = s.footprint.redis_used_memory
    redis = "-" if used is None else f"{used / 2**20:.2f} MiB"
    head = (
        f"[{minutes:3d}:{seconds:02d}] sent {s.sent} (not sent {unsent}) ok {ok} "
        f"failed {failed} in flight {s.in_flight}"
    )
    return f"{head} | RSS MiB: {sizes} | redis used {redis}"


def table(v: Verdict) -> Table:
    title = (
        f"Growth after warm-up: median of the samples from t={v.baseline_t_s or 0:.0f}s vs "
        f"median of those from t={v.end_t_s or 0:.0f}s"
    )
    t = Table(title=title)
    for col in ("process", "baseline", "end", "growth", "verdict"):
        t.add_column(col, justify="left" if col == "process" else "right")
    for name, g in sorted(v.growth.items()):
        b, e = _size(name, v.baseline[name]), _size(name, v.end[name])
        t.add_row(name, b, e, f"{g * 100:+.1f} %", "FAIL" if name in v.grown else "ok")
    return t


def _size(name: str, value: float) -> str:
    if name == USED:
        return f"{value / 2**20:.2f} MiB"
    return f"{value / 1024:.1f} MiB"
