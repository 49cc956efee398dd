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


def health_label(row: Mapping[str, Any]) -> str:
    """'healthy', 'unhealthy' or 'unknown' (not scraped yet), and draining/drained."""
    healthy = row.get("healthy")
    health = "unknown" if healthy is None else ("healthy" if healthy else "unhealthy")
    if row.get("status") == "draining":
        return f"{health}, {'drained' if row.get('drained') else 'draining'}"
    return health


def kv_percent(row: Mapping[str, Any]) -> float | None:
    """The worker's KV-cache usage in percent (the API's `kv_usage` is a fraction), as the
    table and the chart both show it."""
    usage = row.get("kv_usage")
    return None if usage is None else round(100.0 * float(usage), 1)


def workers_frame(rows: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per worker; `healthy` shown as a word, drain state included, KV usage in %."""
    records = [
        {
            **{c: r.get(c) for c in COLUMNS},
            "healthy": health_label(r),
            "kv_usage_pct": kv_percent(r),
        }
        for r in rows
    ]
    return pd.DataFrame(records, columns=list(COLUMNS))


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
