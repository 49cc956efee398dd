"""Additive per-node statistics: what one rollup row holds and what a report merges.

Counting rules (shared by the rollups and by `report_from_requests`):
- `requests` counts every row; `ok` those with status ok; `failed` error, aborted or timeout;
  withdrawn requests (the client left while queued) are neither.
- `violations` counts rows with `slo_violated` that are not withdrawn.
- Tokens and unified service are summed over every row (a request never dispatched — a
  queue timeout, a client gone while queued — records its prompt but no service).
- A latency (TTFT, TPOT, end-to-end, queue) is counted only where the row has one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

from storage.latency_sketch import LogHistogram, bucket_of
from storage.records import Level, RequestRecord

WINDOWS: Final = (60, 3600, 86400)
"""Rollup resolutions in seconds: minutes, hours and UTC days."""

FAILED_STATUSES: Final = ("error", "aborted", "timeout")
COUNTERS: Final = (
    "requests", "ok", "failed", "violations", "n_in", "n_out", "unified_service",
    "n_ttft", "sum_ttft_ms", "n_tpot", "sum_tpot_ms", "n_e2e", "sum_e2e_ms",
    "n_queue", "sum_queue_ms",
)  # fmt: skip
HISTOGRAMS: Final = ("ttft_hist", "tpot_hist", "e2e_hist")
COUNTS: Final = (
    "requests", "ok", "failed", "violations", "n_in", "n_out", "n_ttft", "n_tpot", "n_e2e",
    "n_queue",
)  # fmt: skip
"""The integer counters (the others are float sums)."""
SUMS: Final = {
    "unified_service": "requests", "sum_ttft_ms": "n_ttft", "sum_tpot_ms": "n_tpot",
    "sum_e2e_ms": "n_e2e", "sum_queue_ms": "n_queue",
}  # fmt: skip
"""Each float sum and the count of the values it adds up (none of them negative)."""


LatencyBuckets = tuple[int | None, int | None, int | None]
"""Histogram buckets of a request's TTFT, TPOT and end-to-end latency (None = not measured)."""


def latency_buckets(rec: RequestRecord) -> LatencyBuckets:
    """The histogram buckets of a request's latencies, computed once per request."""
    return (
        None if rec.ttft_ms is None else bucket_of(rec.ttft_ms),
        None if rec.tpot_ms is None else bucket_of(rec.tpot_ms),
        None if rec.e2e_ms is None else bucket_of(rec.e2e_ms),
    )


class RollupKey(NamedTuple):
    """One rollup row: a node (app/agent '' above their level) in one aligned window."""

    level: Level
    window_s: int
    bucket: int
    tenant: str
    app: str
    agent: str


def node_path(level: Level, tenant: str, app: str, agent: str) -> tuple[str, ...]:
    """The node's path at `level`: (tenant,), (tenant, app) or (tenant, app, agent)."""
    if level == "tenant":
        return (tenant,)
    if level == "app":
        return (tenant, app)
    return (tenant, app, agent)


@dataclass(slots=True)
class Counters:
    """The additive scalar totals of a set of requests at one node."""

    requests: int = 0
    ok: int = 0
    failed: int = 0
    violations: int = 0
    n_in: int = 0
    n_out: int = 0
    unified_service: float = 0.0
    n_ttft: int = 0
    sum_ttft_ms: float = 0.0
    n_tpot: int = 0
    sum_tpot_ms: float = 0.0
    n_e2e: int = 0
    sum_e2e_ms: float = 0.0
    n_queue: int = 0
    sum_queue_ms: float = 0.0

    def add_counters(self, other: Counters | Mapping[Any, Any]) -> None:
        """Add another set of counters (or a stored row's counter columns) into this."""
        get = other.__getitem__ if isinstance(other, Mapping) else other.__getattribute__
        for name in COUNTERS:
            setattr(self, name, getattr(self, name) + get(name))

    def subtract_counters(self, other: Counters) -> None:
        """Take another set of counters back out of this (integers exactly; float sums to
        within their rounding, never below zero: every value they add up is ≥ 0, and a sum
        whose count is back at zero is exactly zero). Subtracting in floating point can leave
        a sum a rounding error below zero (0.3 + 0.6 - 0.3 - 0.6 < 0), where reports would
        read service that nobody received."""
        for name in COUNTERS:
            setattr(self, name, getattr(self, name) - getattr(other, name))
        for total, count in SUMS.items():
            if getattr(self, count) == 0 or getattr(self, total) < 0:
                setattr(self, total, 0.0)


@dataclass(slots=True)
class NodeStats(Counters):
    """Counters plus sparse latency histograms: what one rollup row holds (and a delta to
    it). `merge` is exact and associative; `subtract` takes back a delta that was merged in,
    exactly for counts and histograms (float sums to within their rounding, never below
    zero, and exactly zero when their count is back at zero)."""

    ttft_hist: LogHistogram = field(default_factory=LogHistogram)
    tpot_hist: LogHistogram = field(default_factory=LogHistogram)
    e2e_hist: LogHistogram = field(default_factory=LogHistogram)

    def observe(self, rec: RequestRecord) -> None:
        """Count one request."""
        self.observe_indexed(rec, latency_buckets(rec))

    def observe_indexed(self, rec: RequestRecord, buckets: LatencyBuckets) -> None:
        """Count one request whose histogram buckets were computed once (`latency_buckets`)."""
        self.requests += 1
        if rec.status == "ok":
            self.ok += 1
        elif rec.status in FAILED_STATUSES:
            self.failed += 1
        if rec.slo_violated and rec.status != "withdrawn":
            self.violations += 1
        self.n_in += rec.n_in
        self.n_out += rec.n_out
        self.unified_service += rec.unified_cost
        k_ttft, k_tpot, k_e2e = buckets
        if rec.ttft_ms is not None and k_ttft is not None:
            self.n_ttft += 1
            self.sum_ttft_ms += rec.ttft_ms
            self.ttft_hist.add_bucket(k_ttft)
        if rec.tpot_ms is not None and k_tpot is not None:
            self.n_tpot += 1
            self.sum_tpot_ms += rec.tpot_ms
            self.tpot_hist.add_bucket(k_tpot)
        if rec.e2e_ms is not None and k_e2e is not None:
            self.n_e2e += 1
            self.sum_e2e_ms += rec.e2e_ms
            self.e2e_hist.add_bucket(k_e2e)
        if rec.queue_ms is not None:
            self.n_queue += 1
            self.sum_queue_ms += rec.queue_ms

    def merge(self, other: NodeStats) -> None:
        """Add `other` into this."""
        self.add_counters(other)
        for name in HISTOGRAMS:
            getattr(self, name).merge(getattr(other, name))

    def holds(self, other: NodeStats) -> bool:
        """Whether `other` can have been merged into this: no count and no histogram bucket
        of it is larger than this one's."""
        if any(getattr(self, name) < getattr(other, name) for name in COUNTS):
            return False
        for name in HISTOGRAMS:
            mine = getattr(self, name).counts
            if any(c > mine.get(k, 0) for k, c in getattr(other, name).counts.items()):
                return False
        return True

    def subtract(self, other: NodeStats) -> None:
        """Take `other` back out of this; `other` must have been merged in (a histogram count
        that would go below zero raises ValueError)."""
        for name in HISTOGRAMS:
            getattr(self, name).subtract(getattr(other, name))
        self.subtract_counters(other)

    def merge_columns(self, row: Mapping[Any, Any]) -> None:
        """Add a stored rollup row (its column values) into this."""
        self.add_counters(row)
        for name in HISTOGRAMS:
            getattr(self, name).merge_bytes(row[name])

    def to_columns(self) -> dict[str, Any]:
        """Column values of a rollup row holding exactly these totals."""
        values: dict[str, Any] = {name: getattr(self, name) for name in COUNTERS}
        for name in HISTOGRAMS:
            values[name] = getattr(self, name).to_bytes()
        return values

    @classmethod
    def from_columns(cls, row: Mapping[Any, Any]) -> NodeStats:
        """Inverse of `to_columns`."""
        stats = cls()
        stats.merge_columns(row)
        return stats


def rollup_deltas(
    records: Iterable[RequestRecord], *, windows: tuple[int, ...] = WINDOWS
) -> dict[RollupKey, NodeStats]:
    """What `records` add to each rollup row: every level, every window, by arrival time.

    Each request is counted once, into the group of requests with its agent and its bucket in
    every window; each group is then merged into its row at every level in every window.
    Merging is exact for counts and histograms, so only the float sums' rounding can differ
    from counting every request into every row (by an ulp or so).
    """
    groups: dict[tuple[str, str, str, tuple[int, ...]], NodeStats] = {}
    for rec in records:
        arrival = rec.arrival
        place = (rec.tenant, rec.app, rec.agent, tuple(int(arrival // w) * w for w in windows))
        stats = groups.get(place)
        if stats is None:
            stats = groups[place] = NodeStats()
        stats.observe_indexed(rec, latency_buckets(rec))
    deltas: dict[RollupKey, NodeStats] = {}
    for (tenant, app, agent, buckets), stats in groups.items():
        nodes: tuple[tuple[Level, str, str], ...] = (
            ("tenant", "", ""),
            ("app", app, ""),
            ("agent", app, agent),
        )
        for window, bucket in zip(windows, buckets, strict=True):
            for level, node_app, node_agent in nodes:
                key = RollupKey(level, window, bucket, tenant, node_app, node_agent)
                total = deltas.get(key)
                if total is None:
                    total = deltas[key] = NodeStats()
                total.merge(stats)
    return deltas
