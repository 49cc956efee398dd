"""Pure builders of the Live page: node selection, tables, figures and the rolling history.

Inputs are the admin API's `/admin/nodes` payload (see `control_plane/api/admin/node_views.py`
for the fields); nothing here does I/O or touches Streamlit.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import plotly.graph_objects as go

Row = Mapping[str, Any]
COLUMNS = (
    "key",
    "weight",
    "queued",
    "inflight",
    "counter",
    "service",
    "service_rate",
    "safi",
    "safi_slo",
    "safi_usage",
    "credit",
    "resource",
    "slo_attainment_1m",
    "slo_attainment_1h",
)
HISTORY_LEN = 600


def visible_nodes(nodes: Sequence[Row], tenant: str | None, app: str | None) -> list[Row]:
    """The drill-down: every tenant; a tenant's applications; an application's agents."""
    if tenant is None:
        return [n for n in nodes if n["level"] == "tenant"]
    if app is None:
        return [n for n in nodes if n["level"] == "app" and n["path"][0] == tenant]
    return [n for n in nodes if n["level"] == "agent" and n["path"][:2] == [tenant, app]]


def children(nodes: Sequence[Row], level: str, parent: Sequence[str] = ()) -> list[str]:
    """Names of the nodes at `level` under `parent` (for the drill-down selectors)."""
    depth = len(parent)
    return sorted(
        n["path"][depth]
        for n in nodes
        if n["level"] == level and list(n["path"][:depth]) == list(parent)
    )


def nodes_frame(rows: Sequence[Row]) -> pd.DataFrame:
    """The per-node table, one row per node, in COLUMNS order."""
    return pd.DataFrame([{c: r.get(c) for c in COLUMNS} for r in rows], columns=list(COLUMNS))


def safi_figure(rows: Sequence[Row], alpha: float, beta: float) -> go.Figure:
    """SAFI per node as its two stacked parts, with the β band above the lowest SAFI: nodes
    above the band are far enough from the best-off node for a credit exchange."""
    keys = [r["key"] for r in rows]
    fig = go.Figure(
        [
            go.Bar(x=keys, y=[alpha * r["safi_slo"] for r in rows], name="α · violation rate"),
            go.Bar(x=keys, y=[(1 - alpha) * r["safi_usage"] for r in rows], name="(1−α) · usage"),
        ]
    )
    if rows:
        low = min(r["safi"] for r in rows)
        fig.add_hrect(
            y0=low,
            y1=low + beta,
            fillcolor="green",
            opacity=0.15,
            line_width=0,
            annotation_text=f"β = {beta:g}",
            annotation_position="top left",
        )
    fig.update_layout(barmode="stack", title="SAFI (lower is better)", height=320)
    return fig


def grouped_bars(rows: Sequence[Row], fields: Mapping[str, str], title: str) -> go.Figure:
    """One bar group per node, one bar per field (label → field name); None → gap."""
    keys = [r["key"] for r in rows]
    fig = go.Figure(
        [
            go.Bar(x=keys, y=[r.get(name) for r in rows], name=label)
            for label, name in fields.items()
        ]
    )
    fig.update_layout(barmode="group", title=title, height=320)
    return fig


def append_history(
    history: list[dict[str, Any]], payload: Row, now: float, max_len: int = HISTORY_LEN
) -> list[dict[str, Any]]:
    """`history` plus one snapshot of every node's counter, service and tokens (bounded)."""
    snapshot = {
        "t": now,
        "nodes": {
            n["key"]: {
                "counter": n["counter"],
                "service": n["service"],
                "tokens": n["tokens_in"] + n["tokens_out"],
            }
            for n in payload.get("nodes", [])
        },
    }
    return [*history, snapshot][-max_len:]


def history_frame(history: Sequence[Row], keys: Sequence[str], metric: str) -> pd.DataFrame:
    """Long table (time, node, value) of `metric` for `keys` over the history."""
    records = [
        {"time": pd.to_datetime(s["t"], unit="s"), "node": k, "value": s["nodes"][k][metric]}
        for s in history
        for k in keys
        if k in s["nodes"]
    ]
    return pd.DataFrame(records, columns=["time", "node", "value"])


def token_rates(history: Sequence[Row], keys: Sequence[str]) -> pd.DataFrame:
    """Tokens per second per node between consecutive snapshots."""
    records = []
    for before, after in itertools.pairwise(history):
        span = after["t"] - before["t"]
        for k in keys:
            if span > 0 and k in before["nodes"] and k in after["nodes"]:
                delta = after["nodes"][k]["tokens"] - before["nodes"][k]["tokens"]
                records.append(
                    {"time": pd.to_datetime(after["t"], unit="s"), "node": k, "value": delta / span}
                )
    return pd.DataFrame(records, columns=["time", "node", "value"])


def lines_figure(frame: pd.DataFrame, title: str, y_title: str) -> go.Figure:
    """One line per node of a long (time, node, value) table."""
    fig = go.Figure(
        [
            go.Scatter(x=part["time"], y=part["value"], mode="lines+markers", name=str(node))
            for node, part in frame.groupby("node", sort=True)
        ]
    )
    fig.update_layout(title=title, height=300, yaxis_title=y_title)
    return fig
