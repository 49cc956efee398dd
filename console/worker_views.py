"""Pure builders of the Workers page from `/admin/workers` rows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import plotly.graph_objects as go

COLUMNS = (
    "id",
    "status",
    "healthy",
    "model",
    "kind",
    "url",
    "inflight",
    "running",
    "waiting",
    "kv_usage_pct",
    "preemptions",
    "max_num_seqs",
    "kv_tokens",
    "metrics_age_s",
    "error",
)
STALE_AFTER_S = 10.0
"""Metrics older than this are stale where the admin API gives no `stale_after_s` of its own
(its `ARBITER_SCRAPE_INTERVAL_S` taken into account): the scheduler leader scrapes every worker
every `scrape_interval_s` (0.5 s by default) and stores each sample, even a failed scrape's. A
sample this old means the scrape loop stopped (no leader, or a stalled one): the worker's
health and load are from then, not now. Not fewer seconds: a loaded leader can miss a few
scrapes without anything being wrong."""


def metrics_age(row: Mapping[str, Any]) -> float | None:
    """Seconds since the worker's last stored scrape (None: never scraped)."""
    age = row.get("metrics_age_s")
    return None if age is None else float(age)


def is_stale(row: Mapping[str, Any]) -> bool:
    """Whether the worker's health and load are from a scrape older than the API's
    `stale_after_s` (else `STALE_AFTER_S`)."""
    age = metrics_age(row)
    limit = row.get("stale_after_s")
    return age is not None and age > (STALE_AFTER_S if limit is None else float(limit))


def stale_limit(rows: Sequence[Mapping[str, Any]]) -> float:
    """The age past which the rows' scrapes read as stale (the API's, else `STALE_AFTER_S`)."""
    limits = [float(r["stale_after_s"]) for r in rows if r.get("stale_after_s") is not None]
    return max(limits, default=STALE_AFTER_S)


def stale_workers(rows: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Worker id → metrics age (s) of every worker whose health and load are stale."""
    return {str(r["id"]): float(r["metrics_age_s"]) for r in rows if is_stale(r)}


def health_label(row: Mapping[str, Any]) -> str:
    """'healthy', 'unhealthy' or 'unknown' (not scraped yet), and draining/drained; a stale
    scrape's health is marked with its age (it was so then, not now)."""
    healthy = row.get("healthy")
    health = "unknown" if healthy is None else ("healthy" if healthy else "unhealthy")
    if healthy is not None and is_stale(row):
        health = f"{health}? (stale: {metrics_age(row):.0f} s old)"
    if row.get("status") == "draining":
        return f"{health}, {'drained' if row.get('drained') else 'draining'}"
    return health


def kv_percent(row: Mapping[str, Any]) -> float | None:
    """The worker's KV-cache usage in percent (the API's `kv_usage` is a fraction), as the
    table and the chart both show it."""
    usage = row.get("kv_usage")
    return None if usage is None else round(100.0 * float(usage), 1)


def workers_frame(rows: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per worker; `healthy` shown as a word, drain state included (and a stale
    scrape marked), KV usage in %, the metrics' age in seconds to one decimal."""
    records = [
        {
            **{c: r.get(c) for c in COLUMNS},
            "healthy": health_label(r),
            "kv_usage_pct": kv_percent(r),
            "metrics_age_s": _rounded(metrics_age(r)),
        }
        for r in rows
    ]
    return pd.DataFrame(records, columns=list(COLUMNS))


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def load_figure(rows: Sequence[Mapping[str, Any]]) -> go.Figure:
    """Running and waiting requests per worker, KV usage (%) on a second axis."""
    ids = [r["id"] for r in rows]
    fig = go.Figure(
        [
            go.Bar(x=ids, y=[r.get("running") for r in rows], name="running"),
            go.Bar(x=ids, y=[r.get("waiting") for r in rows], name="waiting"),
            go.Scatter(
                x=ids,
                y=[kv_percent(r) for r in rows],
                name="KV usage %",
                yaxis="y2",
                mode="markers",
                marker={"size": 12},
            ),
        ]
    )
    fig.update_layout(
        barmode="group",
        title="Load per worker",
        height=320,
        yaxis2={"overlaying": "y", "side": "right", "range": [0, 100], "title": "KV %"},
    )
    return fig
