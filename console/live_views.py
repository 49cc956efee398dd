"""Pure builders of the Live page: node selection, tables, figures and the time series.

Inputs are the admin API's `/admin/nodes` payload (see `control_plane/api/admin/node_views.py`
for the fields) and its `/admin/live/history` series (`control_plane/api/admin/live_history.py`);
nothing here does I/O or touches Streamlit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import plotly.graph_objects as go

Row = Mapping[str, Any]
MISSING = "—"
LEVEL_LABELS = {"tenant": "Tenant", "app": "Application", "agent": "Agent"}
STATUS_LABELS = {"starved": "🔴 starved", "over-served": "🟠 over-served", "ok": "🟢 ok"}
CREDIT_POLICIES = frozenset({"exfairs"})
"""Policies that keep SAFI credits: the SAFI and credits charts are theirs."""
COLUMNS: tuple[tuple[str, str, str], ...] = (
    # (field, label, format): "int", "rate" (1 decimal), "pct" (share → %), "s" (2 decimals)
    ("status", "Status", "status"),
    ("weight", "Weight", "num"),
    ("demand_rate", "Demand (UT/s)", "rate"),
    ("service_rate", "Received (UT/s)", "rate"),
    ("entitled_share", "Entitled %", "pct"),
    ("received_share", "Received %", "pct"),
    ("queued", "Queued", "int"),
    ("inflight", "In flight", "int"),
    ("wait_p95_s", "p95 wait (s)", "s"),
    ("oldest_wait_s", "Oldest queued (s)", "s"),
    ("slo_attainment_1m", "SLO attainment 1 min %", "pct"),
    ("slo_attainment_1h", "SLO attainment 1 h %", "pct"),
    ("safi", "SAFI", "safi"),
    ("counter", "Virtual counter", "rate"),
    ("credit", "Credit", "int"),
)
PUBLISH_PERIOD_S = 1.0
"""How often the scheduler leader publishes its live view (`checkpoint_interval_s`, 1 s by
default; the console talks to the admin API only, so it is restated here)."""
STALE_AFTER_S = 10 * PUBLISH_PERIOD_S
"""A live snapshot older than ten publish periods is stale: the leader stopped, stalled or lost
its lease, and its numbers are not now. Not fewer: a leader on a loaded box (or one configured
with a longer period) can miss a few publications without anything being wrong."""
LEADER_ONLY = (
    "status",
    "demand_rate",
    "entitled_rate",
    "entitled_share",
    "received_share",
    "wait_p95_s",
    "oldest_wait_s",
)
"""Node fields only the scheduler leader's live view knows: without one the API fills them
with 'ok' and zeros (`node_views._load_fields`), which would read as measured."""
UTC_TIME = "time (UTC)"
RANGES: dict[str, tuple[int, str]] = {
    "5m": (300, "5 min"),
    "15m": (900, "15 min"),
    "1h": (3600, "1 h"),
    "6h": (21_600, "6 h"),
    "24h": (86_400, "24 h"),
}
"""The range picker: URL key → (seconds, label)."""
DEFAULT_RANGE = "15m"
COUNTERS = "Virtual counters"
SERVICE_TITLES = {
    "redis": "Service since the leader's ledger began (UT, cumulative)",
    "rollups": "Service since the range's start (UT, cumulative)",
}
"""The service chart's title per history source: the leader's rolling history samples the
ledger's lifetime totals, the SQL rollups are summed from the range's first bucket, so the
same chart reads a million at 1 h and a thousand at 6 h."""
DEMAND_VS_RECEIVED = "Demand vs received (UT/s, the nodes shown)"
HISTORY_CHARTS: dict[str, tuple[str, str, str]] = {
    # key → (history field, title, y axis)
    "svc": ("service", "Service (Unified Tokens)", "UT"),  # titled by source: SERVICE_TITLES
    "rate": ("service_rate", "Received over time (UT/s)", "UT/s"),
    "tps": ("tokens_rate", "Tokens per second", "tokens/s"),
    "wait": ("wait_p95_s", "p95 queue wait over time (s)", "s"),
}


def visible_nodes(nodes: Sequence[Row], tenant: str | None, app: str | None) -> list[Row]:
    """The drill-down: every tenant; a tenant's applications; an application's agents."""
    if tenant is None:
        return [n for n in nodes if n["level"] == "tenant"]
    if app is None:
        return [n for n in nodes if n["level"] == "app" and n["path"][0] == tenant]
    return [n for n in nodes if n["level"] == "agent" and n["path"][:2] == [tenant, app]]


def has_leader(payload: Row) -> bool:
    """Whether a scheduler leader published the live view this `/admin/nodes` answer is of."""
    return payload.get("leader") is not None


def known_rows(payload: Row, rows: Sequence[Row]) -> list[Row]:
    """`rows` as shown: without a leader, the fields only it knows (`LEADER_ONLY`) are
    unknown (None: '—' in the table, a gap in the charts), not 'ok' and 0."""
    if has_leader(payload):
        return list(rows)
    return [{**r, **dict.fromkeys(LEADER_ONLY)} for r in rows]


def children(nodes: Sequence[Row], level: str, parent: Sequence[str] = ()) -> list[str]:
    """Names of the nodes at `level` under `parent` (for the drill-down selectors)."""
    depth = len(parent)
    return sorted(
        n["path"][depth]
        for n in nodes
        if n["level"] == level and list(n["path"][:depth]) == list(parent)
    )


def cell(value: Any, kind: str) -> str:
    """A table cell: rounded, with its unit in the column label, `—` when unknown."""
    if value is None or (isinstance(value, float) and value != value):
        return MISSING
    if kind == "status":
        return STATUS_LABELS.get(str(value), str(value))
    if kind == "int":
        return f"{int(value):,}"
    if kind == "pct":
        return f"{100 * float(value):.1f}"
    if kind == "s":
        return f"{float(value):.2f}"
    if kind == "safi":
        return f"{float(value):.3f}"
    return f"{float(value):,.1f}" if kind == "rate" else f"{float(value):g}"


def key_label(rows: Sequence[Row]) -> str:
    """The pinned key column's label: the level of the rows shown."""
    return LEVEL_LABELS.get(str(rows[0]["level"]), "Node") if rows else "Node"


def columns_for(policy: str | None) -> list[tuple[str, str, str]]:
    """The table's columns; credits only under a policy that keeps them."""
    return [c for c in COLUMNS if c[0] != "credit" or policy in CREDIT_POLICIES]


def nodes_frame(rows: Sequence[Row], policy: str | None = None) -> pd.DataFrame:
    """The per-node table: the node's name (pinned key), then human labels with units."""
    columns = columns_for(policy)
    if not any(r.get("counter") for r in rows):  # a policy without virtual counters
        columns = [c for c in columns if c[0] != "counter"]
    label = key_label(rows)
    records = [
        {label: r["path"][-1], **{name: cell(r.get(f), kind) for f, name, kind in columns}}
        for r in rows
    ]
    return pd.DataFrame(records, columns=[label, *(name for _, name, _ in columns)])


def flagged(rows: Sequence[Row]) -> dict[str, list[str]]:
    """Names of the starved and over-served nodes among `rows`."""
    return {
        status: [str(r["key"]) for r in rows if r.get("status") == status]
        for status in ("starved", "over-served")
    }


def load_figure(rows: Sequence[Row]) -> go.Figure:
    """Demand, received and entitled per node, in Unified Tokens per second."""
    fields = {"demand": "demand_rate", "received": "service_rate", "entitled": "entitled_rate"}
    fig = grouped_bars(rows, fields, "Demand, received and entitled (UT/s)")
    fig.update_layout(yaxis_title="UT/s")
    return fig


def safi_figure(rows: Sequence[Row], alpha: float, beta: float) -> go.Figure:
    """SAFI per node as its two stacked parts, highest first, with the β band above the lowest
    SAFI: nodes above the band are far enough from the lowest for a credit exchange."""
    rows = sorted(rows, key=lambda r: -float(r["safi"]))
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
    fig.update_layout(barmode="stack", title="SAFI (ExFairS: violations and usage)", height=320)
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


def slo_figure(rows: Sequence[Row]) -> go.Figure:
    """SLO attainment per node over the last minute and hour, in percent as the table shows
    it (the API's fractions drew 0.95 beside a table reading 95.0); None → gap."""
    fields = {"last minute": "slo_attainment_1m", "last hour": "slo_attainment_1h"}
    in_percent = [
        {**r, **{f: None if r.get(f) is None else 100 * float(r[f]) for f in fields.values()}}
        for r in rows
    ]
    fig = grouped_bars(in_percent, fields, "SLO attainment (%)")
    fig.update_layout(yaxis_title="%", yaxis_range=[0, 105])
    return fig


def staleness(payload: Row) -> tuple[float | None, bool]:
    """(age of the leader's live snapshot in seconds, whether it is stale: older than
    `STALE_AFTER_S`); (None, False) when no leader published one."""
    age = payload.get("age_s")
    if age is None:
        return None, False
    return float(age), float(age) > STALE_AFTER_S


def as_of(payload: Row) -> str:
    """The snapshot's time as a UTC clock time ('23:58:05 UTC'), '' when none was published:
    with the refresh off the page stays as drawn, and 'N s ago' stays what it was then."""
    at = payload.get("updated_at")
    if at is None:
        return ""
    return f"{pd.to_datetime(float(at), unit='s', utc=True):%H:%M:%S} UTC"


def jain_text(payload: Row, level: str = "tenant") -> str:
    """Jain's index of SAFI over the level's active nodes, `—` when none is active (the API's
    index of nobody is 1.0, which would read as perfectly fair)."""
    jain = (payload.get("jain") or {}).get(level) or {}
    if not jain.get("nodes") or jain.get("safi") is None:
        return MISSING
    return f"{float(jain['safi']):.3f}"


def range_key(wanted: str | None) -> str:
    """A valid range key (`RANGES`): `wanted` when it is one, else the default."""
    return wanted if wanted in RANGES else DEFAULT_RANGE


def history_query(tenant: str | None, app: str | None) -> dict[str, str]:
    """The `/admin/live/history` filters of the drill-down's level (see `visible_nodes`)."""
    if tenant is None:
        return {"level": "tenant"}
    if app is None:
        return {"level": "app", "tenant": tenant}
    return {"level": "agent", "tenant": tenant, "app": app}


def series_frame(points: Sequence[Row], field: str) -> pd.DataFrame:
    """Long table (time in UTC, node, value) of one history field (None → a gap)."""
    records = [
        {"time": pd.to_datetime(p["t"], unit="s"), "node": p["key"], "value": p.get(field)}
        for p in points
    ]
    frame = pd.DataFrame(records, columns=["time", "node", "value"])
    frame["value"] = pd.to_numeric(frame["value"], errors="coerce")
    return frame


def totals_frame(points: Sequence[Row], fields: Mapping[str, str]) -> pd.DataFrame:
    """Long table (time, series, value): each field (label → name) summed over the nodes."""
    frames = []
    for label, field in fields.items():
        part = series_frame(points, field).groupby("time", as_index=False)["value"].sum()
        frames.append(part.assign(node=label))
    if not frames:
        return pd.DataFrame(columns=["time", "node", "value"])
    merged: pd.DataFrame = pd.concat(frames, ignore_index=True)
    return merged[["time", "node", "value"]]


def history_figures(payload: Row) -> list[tuple[str, go.Figure]]:
    """(key, figure) of every time series the history's source has (see `/admin/live/history`
    `fields`): counters only where a policy keeps them."""
    points, fields = payload.get("points") or [], set(payload.get("fields") or ())
    out = []
    if "counter" in fields and any(p.get("counter") for p in points):
        out.append(("ctr", lines_figure(series_frame(points, "counter"), COUNTERS, "counter")))
    for key, (field, title, unit) in HISTORY_CHARTS.items():
        if field == "service":
            title = SERVICE_TITLES.get(str(payload.get("source")), title)
        if field in fields:
            out.append((key, lines_figure(series_frame(points, field), title, unit)))
    if {"demand_rate", "service_rate"} <= fields:
        both = totals_frame(points, {"demand": "demand_rate", "received": "service_rate"})
        out.append(("dvr", lines_figure(both, DEMAND_VS_RECEIVED, "UT/s")))
    return out


def lines_figure(frame: pd.DataFrame, title: str, y_title: str) -> go.Figure:
    """One line per node of a long (time, node, value) table."""
    fig = go.Figure(
        [
            go.Scatter(x=part["time"], y=part["value"].tolist(), mode="lines", name=str(node))
            for node, part in frame.groupby("node", sort=True)
        ]
    )
    fig.update_layout(title=title, height=300, yaxis_title=y_title, xaxis_title=UTC_TIME)
    return fig
