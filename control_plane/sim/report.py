"""`results.json` and a self-contained `report.html` (Plotly, its JavaScript inlined once).

Charts, one trace per policy or per tenant: service per tenant over time, SAFI over time,
latency CDFs (end-to-end and TTFT), Jain's index over time (service and SAFI), and a summary
table of the headline metrics.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

SUMMARY_KEYS = (
    "requests",
    "slo_violation_rate",
    "e2e_p99_s",
    "ttft_p99_s",
    "tokens_per_s",
    "goodput_rps",
    "mean_safi",
    "jain_safi",
    "jain_service",
    "max_service_gap",
)


def write_results(doc: dict[str, Any], out_dir: Path) -> Path:
    """Write `results.json` (keys in a stable order, same bytes for the same run)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "results.json"
    path.write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    return path


def _per_policy_grid(results: dict[str, Any], title: str) -> go.Figure:
    rows = max(1, len(results))
    return make_subplots(
        rows=rows, cols=1, shared_xaxes=True, subplot_titles=list(results) or [title]
    )


def _tenant_lines(results: dict[str, Any], field: str, title: str, y: str) -> go.Figure:
    fig = _per_policy_grid(results, title)
    for row, res in enumerate(results.values(), start=1):
        ts = res["timeseries"]
        for tenant, values in ts[field].items():
            fig.add_trace(
                go.Scatter(
                    x=ts["t"],
                    y=values,
                    name=tenant,
                    legendgroup=tenant,
                    showlegend=row == 1,
                    mode="lines",
                ),
                row=row,
                col=1,
            )
        fig.update_yaxes(title_text=y, row=row, col=1)
    fig.update_layout(title=title, height=260 * max(1, len(results)) + 80)
    fig.update_xaxes(title_text="scenario time (s)", row=len(results), col=1)
    return fig


def _cdfs(results: dict[str, Any]) -> go.Figure:
    fig = make_subplots(rows=1, cols=2, subplot_titles=["end-to-end latency", "TTFT"])
    for label, res in results.items():
        for col, key in ((1, "e2e_s"), (2, "ttft_s")):
            points = res["cdf"][key]
            if not points:
                continue
            ys = [i / (len(points) - 1) for i in range(len(points))]
            fig.add_trace(
                go.Scatter(x=points, y=ys, name=label, legendgroup=label, showlegend=col == 1),
                row=1,
                col=col,
            )
            fig.update_xaxes(title_text="seconds", row=1, col=col)
    fig.update_layout(title="Latency CDFs", height=420)
    return fig


def _jain(results: dict[str, Any]) -> go.Figure:
    fig = make_subplots(rows=1, cols=2, subplot_titles=["Jain on service", "Jain on SAFI"])
    for label, res in results.items():
        ts = res["timeseries"]
        for col, key in ((1, "jain_service"), (2, "jain_safi")):
            fig.add_trace(
                go.Scatter(
                    x=ts["t"],
                    y=ts[key],
                    name=label,
                    legendgroup=label,
                    showlegend=col == 1,
                    mode="lines",
                ),
                row=1,
                col=col,
            )
    fig.update_yaxes(range=[0, 1.05])
    fig.update_layout(title="Jain's index over time (tenants active in each bin)", height=420)
    return fig


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list):
        return " / ".join(str(v) for v in value)
    return "—" if value is None else str(value)


def summary_table(results: dict[str, Any]) -> str:
    head = "".join(f"<th>{html.escape(k)}</th>" for k in ("policy", *SUMMARY_KEYS))
    rows = "".join(
        "<tr><td>"
        + html.escape(label)
        + "</td>"
        + "".join(f"<td>{html.escape(_fmt(res.get(k)))}</td>" for k in SUMMARY_KEYS)
        + "</tr>"
        for label, res in results.items()
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


def render_html(doc: dict[str, Any]) -> str:
    results = doc["results"]
    figures = [
        _tenant_lines(results, "service", "Service per tenant (Unified Tokens per 10 s)", "UT"),
        _tenant_lines(results, "safi", "SAFI per tenant (trailing window)", "SAFI"),
        _cdfs(results),
        _jain(results),
    ]
    parts = [
        fig.to_html(full_html=False, include_plotlyjs=(i == 0)) for i, fig in enumerate(figures)
    ]
    scenario = doc["scenario"]
    title = html.escape(f"Arbiter {scenario['source']} — {scenario['name']}")
    style = (
        "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}"
    )
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{title}</title>"
        f"<style>{style}</style></head><body><h1>{title}</h1>"
        f"<p>{html.escape(scenario.get('description') or '')}</p>"
        f"<p>seed {scenario['seed']}, duration {scenario['duration_s']} s</p>"
        f"{summary_table(results)}{''.join(parts)}</body></html>"
    )


def write_report(doc: dict[str, Any], out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "report.html"
    path.write_text(render_html(doc), encoding="utf-8")
    return path
