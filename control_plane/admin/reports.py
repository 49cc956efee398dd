"""The fairness report, computed once for every reader: `GET /admin/reports` (and so the
console's Reports page) and `arbiter admin report` call `fairness_report`, so they show the same
numbers.

It wraps `storage`'s report (rollups by default; `source="requests"` scans the rows) and adds
each node's entitlement: `entitled_share = weight / Σ weights` over the report's nodes, and
`share_vs_weight = share / entitled_share` (1 = exactly its weighted share).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from control_plane.gateway.bounds import MAX_EPOCH_S
from storage.db import Database, Repos
from storage.records import Level
from storage.reports import DEFAULT_ALPHA, Report
from storage.repos import report_from_requests

Source = Literal["rollups", "requests"]


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
    """What to report: [start, end) (epoch s, widened to whole minutes), the level, optionally
    one tenant, the series step (60, 3600 or 86400 s; default by span) and the source."""

    start: float
    end: float
    level: Level = "tenant"
    tenant: str | None = None
    step: int | None = None
    source: Source = "rollups"
    alpha: float = DEFAULT_ALPHA


def level_weights(r: Repos, level: Level) -> dict[str, float]:
    """Configured weights of every node at `level`, keyed 'tenant[/app[/agent]]'."""
    weights: dict[str, float] = {}
    for tn in r.tenants.hierarchy():
        if level == "tenant":
            weights[tn.tenant.name] = tn.tenant.weight
            continue
        for an in tn.apps:
            if level == "app":
                weights[f"{tn.tenant.name}/{an.app.name}"] = an.app.weight
                continue
            for agent in an.agents:
                weights[f"{tn.tenant.name}/{an.app.name}/{agent.name}"] = agent.weight
    return weights


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


def report_json(report: Report) -> dict[str, Any]:
    """The report as JSON with each node's entitlement and the period in ISO form."""
    data = report.to_json()
    total_weight = sum(node.weight for node in report.nodes)
    for raw, node in zip(data["nodes"], report.nodes, strict=True):
        entitled = node.weight / total_weight if total_weight > 0 else 0.0
        raw["entitled_share"] = entitled
        raw["share_vs_weight"] = node.share / entitled if entitled > 0 else None
    data["from"], data["to"] = iso(report.start), iso(report.end)
    data["generated_at"] = time.time()
    return data


def fairness_report(db: Database, query: ReportQuery) -> dict[str, Any]:
    """The report for `query` as JSON (stable keys; see `storage.reports.Report`)."""
    with db.reader() as r:
        report = _read(r, query, level_weights(r, query.level))
    return report_json(report)
