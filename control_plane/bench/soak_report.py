"""The soak's verdict: memory growth per process after warm-up, errors, restarts.

Growth of a process is `(last − baseline) / baseline` of its RSS, where the baseline is the
first sample taken at or after the warm-up; a process passes under `max_growth` (10 %). The
soak passes when every process and Redis's `used_memory` pass, no request failed (explicit
error, hung or cut short) and no process was restarted (its pid stayed the same).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rich.table import Table

from control_plane.bench.footprint import Footprint

MAX_GROWTH = 0.10


@dataclass(frozen=True)
class Sample:
    """What the soak saw at `t_s` seconds into the driven phase."""

    t_s: float
    footprint: Footprint
    outcomes: dict[str, int]
    in_flight: int = 0
    """Requests sent and not yet ended: growing from sample to sample means falling behind."""

    def as_dict(self) -> dict[str, Any]:
        f = self.footprint
        return {
            "t_s": round(self.t_s, 1),
            "rss_kb": f.rss_kb,
            "pids": f.pids,
            "redis_used_memory": f.redis_used_memory,
            "outcomes": self.outcomes,
            "in_flight": self.in_flight,
        }


@dataclass
class Verdict:
    baseline_t_s: float | None = None
    growth: dict[str, float] = field(default_factory=dict)
    grown: list[str] = field(default_factory=list)
    restarted: list[str] = field(default_factory=list)
    failed_requests: int = 0
    passed: bool = False


def _growth(first: float, last: float) -> float:
    return (last - first) / first if first else 0.0


def verdict(
    samples: list[Sample],
    warmup_s: float,
    outcomes: dict[str, int],
    max_growth: float = MAX_GROWTH,
) -> Verdict:
    """Compare the last sample with the first one after warm-up; `outcomes` are the final
    counts of every request (after the last ones in flight ended)."""
    v = Verdict()
    after = [s for s in samples if s.t_s >= warmup_s]
    if len(after) < 2:
        return v
    base, last = after[0], after[-1]
    v.baseline_t_s = base.t_s
    for name, kb in base.footprint.rss_kb.items():
        if name in last.footprint.rss_kb:
            v.growth[name] = _growth(kb, last.footprint.rss_kb[name])
    b_mem, l_mem = base.footprint.redis_used_memory, last.footprint.redis_used_memory
    if b_mem and l_mem:
        v.growth["redis used_memory"] = _growth(b_mem, l_mem)
    v.grown = sorted(n for n, g in v.growth.items() if g >= max_growth)
    first_pids = samples[0].footprint.pids
    v.restarted = sorted(
        n for n, pid in first_pids.items() if last.footprint.pids.get(n, pid) != pid
    )
    v.restarted += sorted(set(first_pids) - set(last.footprint.pids))
    v.failed_requests = sum(n for k, n in outcomes.items() if k != "ok")
    v.passed = not v.grown and not v.restarted and v.failed_requests == 0
    return v


def sample_line(s: Sample) -> str:
    """One line per sample: time, requests so far, RSS per process, Redis used_memory."""
    minutes, seconds = divmod(int(s.t_s), 60)
    ok = s.outcomes.get("ok", 0)
    failed = sum(n for k, n in s.outcomes.items() if k != "ok")
    sizes = " ".join(f"{n} {kb / 1024:.1f}" for n, kb in sorted(s.footprint.rss_kb.items()))
    used = s.footprint.redis_used_memory
    redis = "-" if used is None else f"{used / 2**20:.2f} MiB"
    head = f"[{minutes:3d}:{seconds:02d}] ok {ok} failed {failed} in flight {s.in_flight}"
    return f"{head} | RSS MiB: {sizes} | redis used {redis}"


def table(samples: list[Sample], v: Verdict) -> Table:
    t = Table(title=f"Growth after warm-up (from t={v.baseline_t_s or 0:.0f}s to the end)")
    for col in ("process", "baseline", "last", "growth", "verdict"):
        t.add_column(col, justify="left" if col == "process" else "right")
    base = next((s for s in samples if s.t_s == v.baseline_t_s), None)
    last = samples[-1] if samples else None
    for name, g in sorted(v.growth.items()):
        b, e = _sizes(name, base), _sizes(name, last)
        t.add_row(name, b, e, f"{g * 100:+.1f} %", "FAIL" if name in v.grown else "ok")
    return t


def _sizes(name: str, s: Sample | None) -> str:
    if s is None:
        return "-"
    if name == "redis used_memory":
        used = s.footprint.redis_used_memory
        return "-" if used is None else f"{used / 2**20:.2f} MiB"
    kb = s.footprint.rss_kb.get(name)
    return "-" if kb is None else f"{kb / 1024:.1f} MiB"
