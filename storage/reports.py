"""Fairness reports: per-node totals, latency percentiles, SAFI and Jain's index.

Both sources — the rollups (fast) and the request rows (exact, `report_from_requests`) — reduce
to per-node `Counters`, per-node latency percentiles and per-window totals; `assemble_report`
derives every figure from those, so the two sources can be compared number for number.

Definitions (docs/algorithms.md §16): violation rate = violations / (ok + failed), 0 when nothing
finished; share = unified service / total unified service of the report; SAFI = α·violation
rate + (1−α)·service/max service (lower is better); Jain's index J(x) = (Σx)² / (n·Σx²), 1 when
every x is 0, computed on service per unit weight (weights default to 1).

Service per model kind (`KindService`, HMFS's multi-modal view): a request counts under its
model's registered kind, an unregistered model under "llm" (it is priced as the base LLM);
a tenant's share of a kind = its unified service on that kind / every tenant's on that kind.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal, NamedTuple

from storage.records import MODEL_KINDS, Level
from storage.rollup_stats import Counters

Path = tuple[str, ...]
DEFAULT_ALPHA = 0.7
UNREGISTERED_KIND = "llm"
"""The kind of a request whose model is not in the registry (priced as the base LLM)."""


@dataclass(frozen=True, slots=True)
class Percentiles:
    """p50/p95/p99 of a latency in ms (nearest-rank; within 1 % when from rollups)."""

    p50: float
    p95: float
    p99: float


class NodeLatency(NamedTuple):
    """A node's TTFT, TPOT and end-to-end percentiles (None where nothing was measured)."""

    ttft: Percentiles | None
    tpot: Percentiles | None
    e2e: Percentiles | None


class WindowTotals(NamedTuple):
    """What one node did in one series window."""

    service: float
    violations: int
    finished: int


@dataclass(frozen=True, slots=True)
class NodeReport:
    """One node's figures over the report period."""

    path: tuple[str, ...]
    weight: float
    requests: int
    ok: int
    failed: int
    violations: int
    violation_rate: float
    n_in: int
    n_out: int
    unified_service: float
    share: float
    safi: float
    ttft_ms: Percentiles | None
    tpot_ms: Percentiles | None
    e2e_ms: Percentiles | None
    mean_ttft_ms: float | None
    mean_tpot_ms: float | None
    mean_e2e_ms: float | None
    mean_queue_ms: float | None

    @property
    def key(self) -> str:
        """The node's path joined with '/' (names never contain '/')."""
        return "/".join(self.path)


@dataclass(frozen=True, slots=True)
class WindowPoint:
    """One series window: per-node service and violation rate, and Jain's index on service
    per weight (None for a window in which no node was served: no service, no index)."""

    start: int
    service: dict[str, float]
    violation_rate: dict[str, float]
    jain_service: float | None


@dataclass(frozen=True, slots=True)
class Report:
    """A report over whole minutes [start, end) at one level of the hierarchy (from the
    rollups, whole hours where an edge lies before the minute horizon: the range it covers)."""

    level: Level
    start: int
    end: int
    step: int
    source: Literal["rollups", "requests"]
    nodes: tuple[NodeReport, ...]
    series: tuple[WindowPoint, ...]
    jain_service: float
    jain_violation_rate: float
    jain_safi: float

    def node(self, *path: str) -> NodeReport:
        """The node at `path`; KeyError if it had no requests."""
        for node in self.nodes:
            if node.path == path:
                return node
        raise KeyError("/".join(path))

    def to_json(self) -> dict[str, Any]:
        """Plain JSON (stable keys), nodes with their `key`."""
        data = asdict(self)
        for node, raw in zip(self.nodes, data["nodes"], strict=True):
            raw["key"] = node.key
            raw["path"] = list(node.path)
        return data


def jain(values: Sequence[float]) -> float:
    """Jain's fairness index of `values`; 1.0 for an empty or all-zero list."""
    total = sum(values)
    squares = sum(v * v for v in values)
    if squares == 0:
        return 1.0
    return total * total / (len(values) * squares)


def _mean(total: float, count: int) -> float | None:
    return total / count if count else None


def _rate(violations: int, finished: int) -> float:
    return violations / finished if finished else 0.0


def _node_report(
    path: Path,
    stats: Counters,
    latency: NodeLatency,
    weight: float,
    total: float,
    peak: float,
    alpha: float,
) -> NodeReport:
    rate = _rate(stats.violations, stats.ok + stats.failed)
    usage = stats.unified_service / peak if peak > 0 else 0.0
    return NodeReport(
        path=path,
        weight=weight,
        requests=stats.requests,
        ok=stats.ok,
        failed=stats.failed,
        violations=stats.violations,
        violation_rate=rate,
        n_in=stats.n_in,
        n_out=stats.n_out,
        unified_service=stats.unified_service,
        share=stats.unified_service / total if total > 0 else 0.0,
        safi=alpha * rate + (1 - alpha) * usage,
        ttft_ms=latency.ttft,
        tpot_ms=latency.tpot,
        e2e_ms=latency.e2e,
        mean_ttft_ms=_mean(stats.sum_ttft_ms, stats.n_ttft),
        mean_tpot_ms=_mean(stats.sum_tpot_ms, stats.n_tpot),
        mean_e2e_ms=_mean(stats.sum_e2e_ms, stats.n_e2e),
        mean_queue_ms=_mean(stats.sum_queue_ms, stats.n_queue),
    )


def _window_point(
    start: int,
    totals: Mapping[Path, WindowTotals],
    paths: Sequence[Path],
    weights: Mapping[Path, float],
) -> WindowPoint:
    empty = WindowTotals(0.0, 0, 0)
    per_node = {path: totals.get(path, empty) for path in paths}
    shares = [t.service / weights[p] for p, t in per_node.items()]
    return WindowPoint(
        start=start,
        service={"/".join(p): t.service for p, t in per_node.items()},
        violation_rate={"/".join(p): _rate(t.violations, t.finished) for p, t in per_node.items()},
        jain_service=jain(shares) if any(shares) else None,
    )


def assemble_report(
    *,
    level: Level,
    span: tuple[int, int, int],
    source: Literal["rollups", "requests"],
    stats: Mapping[Path, Counters],
    latency: Mapping[Path, NodeLatency],
    windows: Mapping[int, Mapping[Path, WindowTotals]],
    weights: Mapping[str, float] | None = None,
    alpha: float = DEFAULT_ALPHA,
) -> Report:
    """Derive every figure of a report from per-node totals; `span` = (start, end, step).

    `weights` maps node keys ('tenant/app/agent') to weights; missing nodes weigh 1.
    """
    start, end, step = span
    paths = sorted(stats)
    node_weights = {p: (weights or {}).get("/".join(p), 1.0) for p in paths}
    total = sum(s.unified_service for s in stats.values())
    peak = max((s.unified_service for s in stats.values()), default=0.0)
    nodes = tuple(
        _node_report(p, stats[p], latency[p], node_weights[p], total, peak, alpha) for p in paths
    )
    series = tuple(
        _window_point(w, windows.get(w, {}), paths, node_weights)
        for w in range((start // step) * step, end, step)
    )
    return Report(
        level=level,
        start=start,
        end=end,
        step=step,
        source=source,
        nodes=nodes,
        series=series,
        jain_service=jain([n.unified_service / n.weight for n in nodes]),
        jain_violation_rate=jain([n.violation_rate for n in nodes]),
        jain_safi=jain([n.safi for n in nodes]),
    )


class KindTotals(NamedTuple):
    """What one tenant received on one model kind: SQL sums over its requests."""

    tenant: str
    kind: str
    requests: int
    n_in: int
    n_out: int
    unified_service: float
    images: int = 0
    """Images generated (image models; their `n_out` counts denoising steps)."""


@dataclass(frozen=True, slots=True)
class KindService:
    """A tenant's service on one model kind, with its share of that kind's unified service
    (0 when the kind's total is 0); the shares of one kind sum to 1 otherwise."""

    tenant: str
    kind: str
    requests: int
    n_in: int
    n_out: int
    unified_service: float
    share: float
    images: int = 0


def _kind_rank(kind: str) -> int:
    return MODEL_KINDS.index(kind) if kind in MODEL_KINDS else len(MODEL_KINDS)


def kind_service(totals: Iterable[KindTotals]) -> list[KindService]:
    """Each (tenant, kind)'s totals with its share of the kind's unified service, ordered by
    tenant, then kind in `MODEL_KINDS` order."""
    rows = list(totals)
    per_kind: dict[str, float] = {}
    for row in rows:
        per_kind[row.kind] = per_kind.get(row.kind, 0.0) + row.unified_service
    ordered = sorted(rows, key=lambda r: (r.tenant, _kind_rank(r.kind), r.kind))
    return [
        KindService(
            *row[:6],
            share=row.unified_service / per_kind[row.kind] if per_kind[row.kind] else 0.0,
            images=row.images,
        )
        for row in ordered
    ]
