"""Report JSON (from `report_service.fairness_report`) as CSV rows or a self-contained HTML page
with Plotly charts. Pure formatting: every number comes from the JSON unchanged."""

from __future__ import annotations

import csv
import html
import io
from collections.abc import Mapping
from typing import Any, Final

import plotly.graph_objects as go

LATENCIES: Final = ("ttft_ms", "tpot_ms", "e2e_ms")
COLUMNS: Final = (
    "node", "tenant", "app", "agent", "weight", "entitled_share", "share", "share_vs_weight",
    "requests", "ok", "failed", "violations", "violation_rate", "n_in", "n_out",
    "unified_service", "safi",
    *(f"{lat[:-3]}_{p}_ms" for lat in LATENCIES for p in ("p50", "p95", "p99")),
    "mean_queue_ms",
)  # fmt: skip


def node_row(node: Mapping[str, Any]) -> dict[str, Any]:
    """One flat row per node (the CSV line and the console's table row)."""
    path = [*node["path"], None, None]
    row: dict[str, Any] = {
        "node": node["key"],
        "tenant": path[0],
        "app": path[1],
        "agent": path[2],
    }
    for name in COLUMNS[4:]:
        if name in node:
            row[name] = node[name]
    for lat in LATENCIES:
        pct = node.get(lat) or {}
        for p in ("p50", "p95", "p99"):
            row[f"{lat[:-3]}_{p}_ms"] = pct.get(p)
    return {name: row.get(name) for name in COLUMNS}


def to_csv(report: Mapping[str, Any]) -> str:
    """The nodes table as CSV (header + one line per node)."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(COLUMNS), lineterminator="\n")
    writer.writeheader()
    for node in report["nodes"]:
        writer.writerow({k: "" if v is None else v for k, v in node_row(node).items()})
    return out.getvalue()


def jain_figure(report: Mapping[str, Any]) -> go.Figure:
    """Jain's index of weighted service per series window."""
    series = report.get("series") or []
    fig = go.Figure(
        go.Scatter(
            x=[point["start"] for point in series],
            y=[point["jain_service"] for point in series],
            mode="lines+markers",
            name="Jain (service / weight)",
        )
    )
    fig.update_layout(title="Jain's index over time", yaxis_range=[0, 1.05], height=320)
    fig.update_xaxes(title="window start (epoch s)")
    return fig


def share_figure(report: Mapping[str, Any]) -> go.Figure:
    """Each node's share of service next to its weighted entitlement."""
    nodes = report["nodes"]
    keys = [n["key"] for n in nodes]
    fig = go.Figure(
        [
            go.Bar(x=keys, y=[n["share"] for n in nodes], name="share of service"),
            go.Bar(x=keys, y=[n.get("entitled_share") for n in nodes], name="entitled by weight"),
        ]
    )
    fig.update_layout(title="Service share against weight", barmode="group", height=320)
    return fig


def to_html(report: Mapping[str, Any]) -> str:
    """A self-contained page (Plotly inlined, works offline): summary, charts, nodes table."""
    head = "".join(f"<th>{html.escape(c)}</th>" for c in COLUMNS)
    body = "".join(
        "<tr>" + "".join(f"<td>{_cell(v)}</td>" for v in node_row(n).values()) + "</tr>"
        for n in report["nodes"]
    )
    charts = share_figure(report).to_html(full_html=False, include_plotlyjs=True)
    charts += jain_figure(report).to_html(full_html=False, include_plotlyjs=False)
    title = f"Arbiter fairness report — {report['level']} — {report['from']} to {report['to']}"
    summary = (
        f"Jain's index: service/weight {report['jain_service']:.4f}, "
        f"violation rate {report['jain_violation_rate']:.4f}, SAFI {report['jain_safi']:.4f}"
    )
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        "<style>body{font-family:sans-serif}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:2px 6px;font-size:12px}</style></head><body>"
        f"<h1>{html.escape(title)}</h1><p>{html.escape(summary)}</p>{charts}"
        f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></body></html>"
    )


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    return html.escape(str(value))
