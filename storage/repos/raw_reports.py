"""Reports computed straight from the request rows: SQL aggregates plus exact percentiles.

This is the reference the rollups are checked against (and the fallback for ad-hoc ranges):
it scans every row of the range, so it is exact but slow on long ranges.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from sqlalchemy import ColumnElement, and_, case, func, select
from sqlalchemy.orm import Session

from storage.dialects import floor_div
from storage.errors import InvalidValueError
from storage.latency_sketch import nearest_rank
from storage.models import RequestRow
from storage.records import Level
from storage.report_windows import auto_step, check_step, minute_range
from storage.reports import (
    DEFAULT_ALPHA,
    NodeLatency,
    Path,
    Percentiles,
    Report,
    WindowTotals,
    assemble_report,
)
from storage.rollup_stats import FAILED_STATUSES, Counters

R = RequestRow


def _flag(condition: ColumnElement[bool]) -> ColumnElement[int]:
    return func.coalesce(func.sum(case((condition, 1), else_=0)), 0)


def _path_columns(level: Level) -> list[Any]:
    return {"tenant": [R.tenant], "app": [R.tenant, R.app]}.get(level, [R.tenant, R.app, R.agent])


_VIOLATED = and_(R.slo_violated.is_(True), R.status != "withdrawn")
_FINISHED = R.status.in_(("ok", *FAILED_STATUSES))
_TOTALS: dict[str, Any] = {
    "requests": func.count(),
    "ok": _flag(R.status == "ok"),
    "failed": _flag(R.status.in_(FAILED_STATUSES)),
    "violations": _flag(_VIOLATED),
    "n_in": func.sum(R.n_in),
    "n_out": func.sum(R.n_out),
    "unified_service": func.sum(R.unified_cost),
    "n_ttft": func.count(R.ttft_ms),
    "sum_ttft_ms": func.coalesce(func.sum(R.ttft_ms), 0.0),
    "n_tpot": func.count(R.tpot_ms),
    "sum_tpot_ms": func.coalesce(func.sum(R.tpot_ms), 0.0),
    "n_e2e": func.count(R.e2e_ms),
    "sum_e2e_ms": func.coalesce(func.sum(R.e2e_ms), 0.0),
    "n_queue": func.count(R.queue_ms),
    "sum_queue_ms": func.coalesce(func.sum(R.queue_ms), 0.0),
}


MAX_EXACT_ROWS = 500_000
"""Most request rows one exact report reads: it holds every row's latencies in memory (about
a kilobyte per row in Python), in a gateway process that also serves tenants."""


def report_from_requests(
    session: Session,
    *,
    start: float,
    end: float,
    level: Level,
    tenant: str | None = None,
    step: int | None = None,
    weights: Mapping[str, float] | None = None,
    alpha: float = DEFAULT_ALPHA,
    max_rows: int | None = MAX_EXACT_ROWS,
) -> Report:
    """The same report as `RollupRepo.report`, computed from the request rows themselves;
    `InvalidValueError` beyond `max_rows` rows (None: no limit, for benchmarks)."""
    lo, hi = minute_range(start, end)
    step = check_step(step or auto_step(lo, hi), lo, hi)
    where = [R.arrival >= lo, R.arrival < hi]
    if tenant is not None:
        where.append(R.tenant == tenant)
    rows = 0 if max_rows is None else _count(session, where)
    if max_rows is not None and rows > max_rows:
        raise InvalidValueError(
            f"source=requests reads at most {max_rows:,} request rows and this range "
            f"holds {rows:,}: narrow 'from'/'to' (or give a tenant), or use source=rollups"
        )
    path_cols = _path_columns(level)
    stats = _totals(session, path_cols, where)
    return assemble_report(
        level=level,
        span=(lo, hi, step),
        source="requests",
        stats=stats,
        latency=_exact_percentiles(session, path_cols, where, stats),
        windows=_windows(session, path_cols, where, step),
        weights=weights,
        alpha=alpha,
    )


def _count(session: Session, where: list[Any]) -> int:
    return int(session.execute(select(func.count()).select_from(R).where(*where)).scalar_one())


def _totals(session: Session, path_cols: list[Any], where: list[Any]) -> dict[Path, Counters]:
    stmt = select(*path_cols, *(v.label(k) for k, v in _TOTALS.items()))
    stmt = stmt.where(*where).group_by(*path_cols)
    stats: dict[Path, Counters] = {}
    for row in session.execute(stmt).mappings():
        path = tuple(row[col.key] for col in path_cols)
        stats[path] = Counters(**{name: row[name] for name in _TOTALS})
    return stats


def _windows(
    session: Session, path_cols: list[Any], where: list[Any], step: int
) -> dict[int, dict[Path, WindowTotals]]:
    window = floor_div(session, R.arrival, step).label("window")
    stmt = select(
        *path_cols,
        window,
        func.sum(R.unified_cost).label("service"),
        _flag(_VIOLATED).label("violations"),
        _flag(_FINISHED).label("finished"),
    )
    stmt = stmt.where(*where).group_by(*path_cols, window)
    windows: dict[int, dict[Path, WindowTotals]] = {}
    for row in session.execute(stmt).mappings():
        path = tuple(row[col.key] for col in path_cols)
        per_node = windows.setdefault(int(row["window"]) * step, {})
        per_node[path] = WindowTotals(row["service"], row["violations"], row["finished"])
    return windows


def _exact_percentiles(
    session: Session, path_cols: list[Any], where: list[Any], stats: Mapping[Path, Counters]
) -> dict[Path, NodeLatency]:
    stmt = select(*path_cols, R.ttft_ms, R.tpot_ms, R.e2e_ms).where(*where)
    values: dict[Path, tuple[list[float], list[float], list[float]]] = {
        path: ([], [], []) for path in stats
    }
    width = len(path_cols)
    for row in session.execute(stmt):
        lists = values[tuple(row[:width])]
        for target, value in zip(lists, row[width:], strict=True):
            if value is not None:
                target.append(value)
    return {path: NodeLatency(*(_exact(v) for v in lists)) for path, lists in values.items()}


def _exact(values: list[float]) -> Percentiles | None:
    if not values:
        return None
    ordered = np.sort(np.asarray(values, dtype=np.float64))
    n = len(ordered)
    p50, p95, p99 = (float(ordered[nearest_rank(n, q) - 1]) for q in (0.5, 0.95, 0.99))
    return Percentiles(p50, p95, p99)
