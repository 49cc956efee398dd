"""Pure builders of the Reports page from `/admin/reports` JSON (the numbers are the API's,
unchanged: the CSV download is the API's own CSV, except `entitled_given_demand`, computed
here from the API's numbers), and of its program-level tables from `/admin/reports/programs`
(the API's numbers in human units, rounded).

Two entitlements, both hierarchical (a parent's share split among its children by weight):
`entitled_share`, the API's, by weight alone; `entitled_given_demand`, the console's, by weight
and demand (`console.entitlement`): a node that asked for less is entitled to what it asked."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from console.entitlement import entitled_shares

COLUMNS = (
    "node",
    "weight",
    "entitled_share",
    "entitled_given_demand",
    "share",
    "share_vs_weight",
    "requests",
    "violations",
    "violation_rate",
    "n_in",
    "n_out",
    "unified_service",
    "safi",
    "ttft_p50_ms",
    "ttft_p95_ms",
    "ttft_p99_ms",
    "tpot_p50_ms",
    "tpot_p95_ms",
    "tpot_p99_ms",
    "e2e_p50_ms",
    "e2e_p95_ms",
    "e2e_p99_ms",
)


PROGRAM_STATS = (("mean", "mean"), ("p90", "P90"), ("p95", "P95"), ("p99", "P99"))
"""(API field, label) of each program-level statistic."""
PREEMPTION_COLUMNS = ("Worker", "Model", "Healthy", "Preemptions (since engine start)")


def _pct(node: Mapping[str, Any], name: str, p: str) -> float | None:
    value = node.get(f"{name}_ms")
    return None if not value else float(value[p])


def report_frame(report: Mapping[str, Any]) -> pd.DataFrame:
    """One row per node with every figure of the report (latency columns end in `_ms`)."""
    records = []
    given_demand = entitled_shares(report["nodes"])
    for n in report["nodes"]:
        row = {c: n.get(c) for c in COLUMNS}
        row["node"] = n["key"]
        row["entitled_given_demand"] = given_demand[n["key"]]
        for name in ("ttft", "tpot", "e2e"):
            for p in ("p50", "p95", "p99"):
                row[f"{name}_{p}_ms"] = _pct(n, name, p)
        records.append(row)
    return pd.DataFrame(records, columns=list(COLUMNS))


def served(report: Mapping[str, Any]) -> bool:
    """Whether any node of the report received service in the period."""
    return any(float(n.get("unified_service") or 0.0) > 0 for n in report.get("nodes") or ())


def period_jain_service(report: Mapping[str, Any]) -> float | None:
    """The period's Jain's index of service per weight; None when nobody was served (the
    API's index of all-zero service is 1.0, which would read as perfectly fair)."""
    return float(report["jain_service"]) if served(report) else None


def jain_figure(report: Mapping[str, Any]) -> go.Figure:
    """Jain's index of weighted service per series window, with the period's value (none
    when nobody was served); a window without service has no index and is drawn as a gap."""
    series = report["series"]
    fig = go.Figure(
        go.Scatter(
            x=[pd.to_datetime(p["start"], unit="s") for p in series],
            y=[p["jain_service"] for p in series],
            mode="lines+markers",
            connectgaps=False,
            name="per window",
        )
    )
    period = period_jain_service(report)
    if period is not None:
        fig.add_hline(y=period, line_dash="dot", annotation_text="whole period")
    fig.update_layout(
        title="Jain's index (service per weight) over time",
        height=300,
        yaxis_range=[0, 1.05],
        xaxis_title="window start (UTC)",
    )
    return fig


def share_figure(report: Mapping[str, Any]) -> go.Figure:
    """Each node's received share of service next to its entitlement given its demand: the
    hierarchical weighted max-min fair share (a node that asked less is entitled to what it
    asked), so a light node is not drawn as starved."""
    nodes = report["nodes"]
    keys = [n["key"] for n in nodes]
    entitled = entitled_shares(nodes)
    fig = go.Figure(
        [
            go.Bar(x=keys, y=[n["share"] for n in nodes], name="received"),
            go.Bar(x=keys, y=[entitled[k] for k in keys], name="entitled given demand"),
        ]
    )
    fig.update_layout(
        barmode="group",
        title="Share received against entitled given demand (hierarchical)",
        height=300,
    )
    return fig


def report_json_bytes(report: Mapping[str, Any]) -> bytes:
    """The report as a downloadable JSON document."""
    return json.dumps(report, indent=2, sort_keys=True).encode()


def _scaled(value: float | None, factor: float, digits: int) -> float | None:
    return None if value is None else round(value * factor, digits)


def _program_row(app: Mapping[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {
        "Application": app["key"],
        "Workflows": app["workflows"],
        "Completed": app["completed"],
        "Calls / workflow": _scaled(app["calls_per_workflow"], 1.0, 2),
    }
    for field, label in PROGRAM_STATS:
        row[f"E2E {label} (s)"] = _scaled(app["e2e_s"][field], 1.0, 3)
    for field, label in PROGRAM_STATS:
        row[f"Token latency {label} (ms/token)"] = _scaled(app["token_latency_s"][field], 1e3, 2)
    return row


def program_frame(report: Mapping[str, Any]) -> pd.DataFrame:
    """One row per application: workflows, completed, calls per workflow, end-to-end latency
    (s, 3 decimals) and program-level token latency (ms per output token, 2 decimals)."""
    columns = ["Application", "Workflows", "Completed", "Calls / workflow"]
    columns += [f"E2E {label} (s)" for _, label in PROGRAM_STATS]
    columns += [f"Token latency {label} (ms/token)" for _, label in PROGRAM_STATS]
    return pd.DataFrame([_program_row(a) for a in report["data"]], columns=columns)


def preemption_frame(report: Mapping[str, Any]) -> pd.DataFrame:
    """One row per worker: its engine's cumulative preemptions, as the leader last saw them."""
    rows = [
        (w["worker"], w["model"], w["healthy"], w["preemptions"])
        for w in report["preemptions"]["data"]
    ]
    return pd.DataFrame(rows, columns=list(PREEMPTION_COLUMNS))
