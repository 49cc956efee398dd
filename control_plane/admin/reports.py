"""The fairness report, computed once for every reader: `GET /admin/reports` (and so the
console's Reports page) and `arbiter admin report` call `fairness_report`, so they show the same
numbers.

It wraps `storage`'s report (rollups by default; `source="requests"` scans the rows) and adds
each node's weight-only entitlement: `path_weights` (the configured weights from its tenant
down to it, 1 where not configured), `entitled_share` (hierarchical: at each depth its weight
over its siblings' in the report, multiplied down the path — `admin.entitlement`) and
`share_vs_weight = share / entitled_share` (1 = exactly its weighted share).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from control_plane.admin.entitlement import Path, hierarchy_weights, path_weights, weight_shares
from control_plane.gateway.bounds import MAX_EPOCH_S
from storage.db import Database, Repos
from storage.records import Level
from storage.reports import DEFAULT_ALPHA, Report
from storage.repos import report_from_requests

Source = Literal["rollups", "requests"]
DEPTHS: dict[Level, int] = {"tenant": 1, "app": 2, "agent": 3}


def parse_time(text: str) -> float:
    """Epoch seconds from a number or an ISO 8601 date/datetime (naive means UTC)."""
    value = text.strip()
    try:
        number = float(value)
    except ValueError:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        try:
            number = parsed.timestamp()
        except (OverflowError, OSError):  # beyond what the platform's time can hold
            raise ValueError(
                f"not a time in 0..{MAX_EPOCH_S:.0f} epoch seconds: {text!r}"
            ) from None
    if not math.isfinite(number) or not 0 <= number <= MAX_EPOCH_S:
        raise ValueError(f"not a time in 0..{MAX_EPOCH_S:.0f} epoch seconds: {text!r}")
    return number


def iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat().replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class ReportQuery:
    """What to report: [start, end) (epoch s, widened to whole minutes; from the rollups, an
    edge before the minute horizon to the whole hour), the level, optionally one tenant, the
    series step (60, 3600 or 86400 s; default by span, at least an hour over pruned minutes,
    where 60 is refused) and the source."""

    start: float
    end: float
    level: Level = "tenant"
    tenant: str | None = None
    step: int | None = None
    source: Source = "rollups"
    alpha: float = DEFAULT_ALPHA


def _at_level(weights: Mapping[Path, float], level: Level) -> dict[str, float]:
    depth = DEPTHS[level]
    return {"/".join(path): w for path, w in weights.items() if len(path) == depth}


def _read(r: Repos, q: ReportQuery, weights: dict[str, float]) -> Report:
    args: dict[str, Any] = {
        "start": q.start,
        "end": q.end,
        "level": q.level,
        "tenant": q.tenant,
        "step": q.step,
        "weights": weights,
        "alpha": q.alpha,
    }
    if q.source == "requests":
        return report_from_requests(r.session, **args)
    return r.rollups.report(**args)


def report_json(report: Report, weights: Mapping[Path, float]) -> dict[str, Any]:
    """The report as JSON with each node's weight-only entitlement (`weights`: configured
    weights by path, see `hierarchy_weights`) and the period in ISO form."""
    data = report.to_json()
    along = {node.path: path_weights(weights, node.path) for node in report.nodes}
    shares = weight_shares(along)
    for raw, node in zip(data["nodes"], report.nodes, strict=True):
        entitled = shares[node.path]
        raw["path_weights"] = along[node.path]
        raw["entitled_share"] = entitled
        raw["share_vs_weight"] = node.share / entitled if entitled > 0 else None
    data["from"], data["to"] = iso(report.start), iso(report.end)
    data["generated_at"] = time.time()
    return data


def fairness_report(db: Database, query: ReportQuery) -> dict[str, Any]:
    """The report for `query` as JSON (stable keys; see `storage.reports.Report`)."""
    with db.reader() as r:
        weights = hierarchy_weights(r.tenants.hierarchy())
        report = _read(r, query, _at_level(weights, query.level))
    return report_json(report, weights)
