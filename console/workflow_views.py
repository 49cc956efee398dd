"""Pure builders of the Workflows page's figures and the "From history" view.

One agent-graph figure serves both views: agents laid out left to right by their hop
distance from the entry (networkx `multipartite_layout`), markers sized by calls, an arrow
per edge labelled with its frequency — the edge's calls over the *source agent's* calls, so a
router that always asks both experts reads 100 % on each edge, and one that picks one expert
at random reads about 50 % on each — with parallel edges dashed in another colour. One box-plot
builder draws per-agent latency boxes from quantiles, one box per agent at its own x position.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import networkx as nx
import pandas as pd
import plotly.graph_objects as go

ENTRY = "(entry)"
SEQUENTIAL_COLOUR = "#4c78a8"
PARALLEL_COLOUR = "#e45756"
NODE_COLOUR = "#9ecae9"
HISTORY_ROWS = 50_000
"""Most request rows the "From history" views ask the API to read (the API's own cap): a view
that read this many left older rows of the period out."""
PULL_BACK = 0.12
"""Edges start and stop this share of their length away from their agents, so that the
arrowhead shows beside the target's marker."""


@dataclass(frozen=True, slots=True)
class EdgeView:
    """One edge as drawn: `frequency` = count over the source's calls (None: unknown)."""

    source: str
    target: str
    count: int
    frequency: float | None
    parallel: int

    @property
    def is_parallel(self) -> bool:
        """Drawn as parallel when at least half of its calls overlapped a sibling's."""
        return self.parallel > 0 and 2 * self.parallel >= self.count

    def label(self) -> str:
        pct = "?" if self.frequency is None else f"{100 * self.frequency:.0f} %"
        if 0 < self.parallel < self.count:
            return f"{pct} ({100 * self.parallel / self.count:.0f} % parallel)"
        return pct


@dataclass(frozen=True, slots=True)
class Box:
    """One agent's latency box: `q` holds p25/p50/p75 and the whisker keys named below."""

    agent: str
    q: Mapping[str, float]
    mean: float | None = None


def percent(frequency: float | None) -> float | None:
    return None if frequency is None else round(100 * frequency, 1)


def layout(calls: Mapping[str, int], edges: Sequence[EdgeView]) -> dict[str, tuple[float, float]]:
    """(x, y) per agent: x grows with the hop distance from the entry (or from the agents
    nobody calls), agents unreachable from there in a last column; rows sorted by name."""
    if not calls:
        return {}
    g = nx.DiGraph()
    g.add_nodes_from(sorted(calls))
    g.add_edges_from((e.source, e.target) for e in edges)
    roots = [ENTRY] if ENTRY in g else [n for n in g if g.in_degree(n) == 0] or sorted(g)[:1]
    depth = dict(nx.multi_source_dijkstra_path_length(g, roots))
    last = max(depth.values(), default=0) + 1
    for node in g.nodes:
        g.nodes[node]["layer"] = int(depth.get(node, last))
    pos = nx.multipartite_layout(g, subset_key="layer", align="vertical")
    return {str(n): (float(p[0]), float(p[1])) for n, p in pos.items()}


def _offset(
    a: tuple[float, float], b: tuple[float, float], both_ways: bool
) -> tuple[tuple[float, float], tuple[float, float]]:
    """The segment drawn for a → b: shifted sideways when b → a exists too (each direction
    on its own side), and pulled back from b."""
    (x0, y0), (x1, y1) = a, b
    length = math.hypot(x1 - x0, y1 - y0) or 1.0
    nx_, ny_ = (y0 - y1) / length, (x1 - x0) / length
    shift = 0.03 if both_ways else 0.0
    x0, y0, x1, y1 = x0 + nx_ * shift, y0 + ny_ * shift, x1 + nx_ * shift, y1 + ny_ * shift
    dx, dy = x1 - x0, y1 - y0
    return (x0 + dx * PULL_BACK, y0 + dy * PULL_BACK), (x1 - dx * PULL_BACK, y1 - dy * PULL_BACK)


def _edge_trace(edge: EdgeView, a: tuple[float, float], b: tuple[float, float]) -> go.Scatter:
    colour = PARALLEL_COLOUR if edge.is_parallel else SEQUENTIAL_COLOUR
    width = 1.5 + 4 * min(1.0, edge.frequency or 0.0)
    return go.Scatter(
        x=[a[0], b[0]],
        y=[a[1], b[1]],
        mode="lines+markers",
        line={"width": width, "color": colour, "dash": "dash" if edge.is_parallel else "solid"},
        marker={
            "symbol": "arrow",
            "angleref": "previous",
            "size": [0, 14],
            "opacity": [0, 1],
            "color": colour,
        },
        hovertext=f"{edge.source} → {edge.target}: {edge.count} calls, {edge.label()}",
        hoverinfo="text",
        showlegend=False,
    )


def _legend(fig: go.Figure) -> None:
    for name, colour, dash in (
        ("sequential call", SEQUENTIAL_COLOUR, "solid"),
        ("parallel calls", PARALLEL_COLOUR, "dash"),
    ):
        fig.add_trace(
            go.Scatter(
                x=[None],
                y=[None],
                mode="lines",
                name=name,
                line={"color": colour, "dash": dash, "width": 3},
            )
        )


def graph_figure(
    calls: Mapping[str, int], edges: Sequence[EdgeView], title: str = "Agent graph"
) -> go.Figure:
    """Agents sized by calls; edges as arrows labelled with their frequency (module doc)."""
    calls = {**{n: 0 for e in edges for n in (e.source, e.target)}, **calls}
    pos = layout(calls, edges)
    pairs = {(e.source, e.target) for e in edges}
    fig = go.Figure()
    for edge in edges:
        if edge.source == edge.target:  # a self-loop: its label above the agent
            x, y = pos[edge.source]
            fig.add_annotation(x=x, y=y - 0.16, text=f"↻ {edge.label()}", showarrow=False)
            continue
        a, b = _offset(pos[edge.source], pos[edge.target], (edge.target, edge.source) in pairs)
        fig.add_trace(_edge_trace(edge, a, b))
        fig.add_annotation(
            x=(a[0] + b[0]) / 2,
            y=(a[1] + b[1]) / 2,
            text=edge.label(),
            showarrow=False,
            bgcolor="rgba(255,255,255,0.85)",
        )
    _legend(fig)
    most = max(calls.values(), default=1) or 1
    names = sorted(calls)
    fig.add_trace(
        go.Scatter(
            x=[pos[n][0] for n in names],
            y=[pos[n][1] for n in names],
            mode="markers+text",
            text=names,
            textposition="top center",
            marker={
                "size": [14 + 36 * math.sqrt(calls[n] / most) for n in names],
                "color": NODE_COLOUR,
                "opacity": 1.0,
                "line": {"width": 1, "color": "#333333"},
            },
            hovertext=[f"{n}: {calls[n]} calls" for n in names],
            hoverinfo="text",
            showlegend=False,
        )
    )
    xs, ys = [p[0] for p in pos.values()], [p[1] for p in pos.values()]
    fig.update_layout(
        title=title,
        height=420,
        xaxis={"visible": False, "range": [min(xs) - 0.15, max(xs) + 0.15]},
        yaxis={"visible": False, "range": [min(ys) - 0.25, max(ys) + 0.3]},
        legend={"x": 0.0, "y": 1.0},
        plot_bgcolor="white",
    )
    return fig


def box_figure(boxes: Sequence[Box], title: str, low: str, high: str) -> go.Figure:
    """One box per agent at x = the agent's name (whiskers: the `low` and `high` quantile
    keys; an agent without quantiles is left out)."""
    fig = go.Figure()
    for box in boxes:
        if not box.q:
            continue
        fig.add_trace(
            go.Box(
                x=[box.agent],
                name=box.agent,
                q1=[box.q["p25"]],
                median=[box.q["p50"]],
                q3=[box.q["p75"]],
                lowerfence=[box.q[low]],
                upperfence=[box.q[high]],
                mean=None if box.mean is None else [box.mean],
            )
        )
    fig.update_layout(title=title, height=340, showlegend=False, xaxis_type="category")
    return fig


# -- From history (`/admin/workflows/{app}`) ---------------------------------------------------
def history_graph(graph: Mapping[str, Any]) -> tuple[dict[str, int], list[EdgeView]]:
    calls = {str(n["id"]): int(n["calls"]) for n in graph["nodes"]}
    edges = [
        EdgeView(e["source"], e["target"], e["count"], e["frequency"], e["parallel"])
        for e in graph["edges"]
    ]
    return calls, edges


def history_figure(graph: Mapping[str, Any]) -> go.Figure:
    return graph_figure(*history_graph(graph), title="Agent graph (request history)")


def edges_frame(graph: Mapping[str, Any]) -> pd.DataFrame:
    """Per edge: calls, frequency (% of the source agent's calls), parallel calls."""
    columns = ["source", "target", "count", "frequency %", "parallel"]
    rows = [
        [e["source"], e["target"], e["count"], percent(e["frequency"]), e["parallel"]]
        for e in graph["edges"]
    ]
    return pd.DataFrame(rows, columns=columns)


def latency_figure(graph: Mapping[str, Any], kind: str) -> go.Figure:
    """Per agent, the `single` (one call) or `remaining` (to the workflow's end) latency in
    ms, from its quantiles (whiskers p5–p95)."""
    boxes = [
        Box(agent, d[kind]["quantiles"], d[kind]["mean"])
        for agent, d in sorted(graph["agents"].items())
    ]
    label = "Single-call" if kind == "single" else "Remaining (to the workflow's end)"
    return box_figure(boxes, f"{label} latency per agent (ms)", "p5", "p95")


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


def rows_note(read: int, what: str, limit: int | None = None) -> tuple[str, str | None]:
    """(caption on how many request rows `what` was built from, warning when the read limit
    — `HISTORY_ROWS` unless given — cut it short, else None)."""
    cap = HISTORY_ROWS if limit is None else limit
    caption = f"{what}: built from the {read:,} most recent request rows of the last 24 h."
    if read < cap:
        return caption, None
    return caption, (
        f"Truncated: only the {cap:,} most recent request rows were read; older calls of the "
        f"last 24 h are not in {what.lower()}."
    )
