"""Pure builders of the Workflows page from `/admin/workflows/{app}`: the agent graph drawn
by depth (left to right) and each agent's latency distributions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd
import plotly.graph_objects as go


def positions(graph: Mapping[str, Any]) -> dict[str, tuple[float, float]]:
    """(x, y) per node: x = depth from the entry, rows centred per depth."""
    per_depth: dict[int, int] = {}
    for node in graph["nodes"]:
        per_depth[node["depth"]] = per_depth.get(node["depth"], 0) + 1
    return {
        n["id"]: (float(n["depth"]), n["row"] - (per_depth[n["depth"]] - 1) / 2.0)
        for n in graph["nodes"]
    }


def graph_figure(graph: Mapping[str, Any]) -> go.Figure:
    """Agents as markers sized by calls, edges as lines labelled with their frequency."""
    pos = positions(graph)
    fig = go.Figure()
    for edge in graph["edges"]:
        (x0, y0), (x1, y1) = pos[edge["source"]], pos[edge["target"]]
        fig.add_trace(
            go.Scatter(
                x=[x0, x1],
                y=[y0, y1],
                mode="lines",
                line={"width": 1 + 4 * edge["frequency"]},
                hoverinfo="skip",
                showlegend=False,
            )
        )
        fig.add_annotation(
            x=(x0 + x1) / 2,
            y=(y0 + y1) / 2,
            showarrow=False,
            text=f"{edge['frequency']:.0%} ({edge['count']})",
        )
    nodes = graph["nodes"]
    fig.add_trace(
        go.Scatter(
            x=[pos[n["id"]][0] for n in nodes],
            y=[pos[n["id"]][1] for n in nodes],
            mode="markers+text",
            text=[n["id"] for n in nodes],
            textposition="top center",
            marker={"size": [12 + min(30, n["calls"] ** 0.5) for n in nodes]},
            hovertext=[f"{n['id']}: {n['calls']} calls" for n in nodes],
            showlegend=False,
        )
    )
    fig.update_layout(title="Agent graph", height=380, xaxis_visible=False, yaxis_visible=False)
    return fig


def edges_frame(graph: Mapping[str, Any]) -> pd.DataFrame:
    columns = ["source", "target", "count", "frequency", "parallel"]
    return pd.DataFrame([{c: e[c] for c in columns} for e in graph["edges"]], columns=columns)


def latency_figure(graph: Mapping[str, Any], kind: str) -> go.Figure:
    """Per-agent box of the `single` (one call) or `remaining` (to the workflow's end)
    latency distribution, drawn from its quantiles (whiskers p5–p95)."""
    fig = go.Figure()
    for agent, dists in sorted(graph["agents"].items()):
        q = dists[kind]["quantiles"]
        if not q:
            continue
        fig.add_trace(
            go.Box(
                name=agent,
                q1=[q["p25"]],
                median=[q["p50"]],
                q3=[q["p75"]],
                lowerfence=[q["p5"]],
                upperfence=[q["p95"]],
                mean=[dists[kind]["mean"]],
            )
        )
    label = "single-call" if kind == "single" else "remaining (to workflow end)"
    fig.update_layout(title=f"{label} latency per agent (ms)", height=320, showlegend=False)
    return fig


def agents_frame(graph: Mapping[str, Any]) -> pd.DataFrame:
    """Per agent: calls measured, mean and p50/p95 of both distributions (ms)."""
    records = []
    for agent, d in sorted(graph["agents"].items()):
        single, remaining = d["single"], d["remaining"]
        records.append(
            {
                "agent": agent,
                "calls": single["count"],
                "single_mean_ms": single["mean"],
                "single_p50_ms": single["quantiles"].get("p50"),
                "single_p95_ms": single["quantiles"].get("p95"),
                "remaining_mean_ms": remaining["mean"],
                "remaining_p95_ms": remaining["quantiles"].get("p95"),
            }
        )
    return pd.DataFrame(records)
