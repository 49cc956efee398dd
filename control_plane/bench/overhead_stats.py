"""Summaries of `arbiter bench overhead`: medians over interleaved rounds, and the hops.

A round measures every target once at one concurrency; the reported figure of each
concurrency is the median over rounds of each round's figure (p50, p99, req/s), so one
noisy round on a shared machine cannot set the result. The added TTFT is computed per round
(gateway minus direct, same percentile) before taking the median.
"""

from __future__ import annotations

import statistics
from typing import Any

from control_plane.bench.load import LoadResult

HOPS: tuple[tuple[str, str, str], ...] = (
    ("accept", "sent", "received"),
    ("door+submit", "received", "submitted"),
    ("queue+decision", "submitted", "decided"),
    ("grant wake-up", "decided", "granted"),
    ("upstream open", "granted", "upstream"),
    ("first byte", "upstream", "first_byte"),
)
"""Per-hop intervals, from the stamps of `X-Arbiter-Timing` and the client: the client sends
→ the gateway's handler starts (HTTP, validation, auth) → the envelope is in Redis (door
checks, submit script) → the scheduler calls the grant script (arrival read, decision) → the
gateway holds the grant (grant script, XREAD, wake-up) → the worker answered → the client
has its first token (relay)."""


def hop_medians(stamps: list[dict[str, float]]) -> dict[str, dict[str, float]]:
    """Per hop: median and p99 in ms over the requests that carry both stamps."""
    out: dict[str, dict[str, float]] = {}
    for name, start, end in HOPS:
        xs = sorted((s[end] - s[start]) * 1e3 for s in stamps if start in s and end in s)
        if xs:
            out[name] = {"p50_ms": _pct(xs, 0.5), "p99_ms": _pct(xs, 0.99), "n": len(xs)}
    return out


def _pct(xs: list[float], q: float) -> float:
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def round_row(results: dict[str, LoadResult]) -> dict[str, Any]:
    """One round at one concurrency: each target's summary and its added TTFT over direct."""
    direct = results["direct"]
    row: dict[str, Any] = {}
    for name, res in results.items():
        summary: dict[str, Any] = dict(res.summary())
        if name != "direct":
            summary["added_ttft_p50_ms"] = (res.pct("ttft", 0.5) - direct.pct("ttft", 0.5)) * 1e3
            summary["added_ttft_p99_ms"] = (res.pct("ttft", 0.99) - direct.pct("ttft", 0.99)) * 1e3
        if res.stamps:
            summary["hops"] = hop_medians(res.stamps)
            fast = sum(1 for s in res.stamps if s.get("fast"))  # granted on the fast lane
            summary["fast_share"] = fast / len(res.stamps)
        row[name] = summary
    return row


MEDIANS = (
    "ttft_p50_ms",
    "ttft_p99_ms",
    "total_p50_ms",
    "rps",
    "added_ttft_p50_ms",
    "added_ttft_p99_ms",
    "fast_share",
)
PER_PROCESS = ("cpu_ms_per_request", "waits_per_request", "preempted_per_request")
"""Per-process figures of a round (`overhead_cpu`), merged as the median of each process."""


def over_rounds(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Median over rounds of each target's figures; errors and requests summed."""
    out: dict[str, Any] = {}
    for target in rounds[0]:
        rows = [r[target] for r in rounds]
        merged: dict[str, Any] = {
            key: statistics.median(float(r[key]) for r in rows) for key in MEDIANS if key in rows[0]
        }
        merged["errors"] = sum(int(r["errors"]) for r in rows)
        merged["requests"] = sum(int(r["requests"]) for r in rows)
        for key in PER_PROCESS:
            per = [r[key] for r in rows if key in r]
            if per:
                merged[key] = {
                    name: statistics.median(p[name] for p in per if name in p) for name in per[0]
                }
        hops = [r["hops"] for r in rows if "hops" in r]
        if hops:
            for stat in ("p50", "p99"):
                merged[f"hops_{stat}_ms"] = {
                    name: statistics.median(h[name][f"{stat}_ms"] for h in hops if name in h)
                    for name, _, _ in HOPS
                    if any(name in h for h in hops)
                }
        out[target] = merged
    return out
