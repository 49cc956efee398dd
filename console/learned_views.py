"""Pure builders of the Workflows page's "Learned by the scheduler" view, from
`/admin/learned/workflows`: what the scheduler leader's orchestrator learned online from
finished calls and what the running policy does with it.

The orchestrator learns under every policy (graphs, latency windows, convergence); only
kairos orders the queue by the agents' priority (recomputed at most every 5 s), ayo by their
remaining stages; no other policy reads what is learned (the kairos_slots placement reads the
single-call modes). Latencies here are in seconds, as the scheduler keeps them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from console.workflow_views import ENTRY, Box, EdgeView, box_figure, graph_figure, percent

PRIORITY_COLUMNS = [
    "priority",
    "agent",
    "score",
    "converged",
    "samples",
    "single-call mode s",
    "remaining mean s",
    "stages",
    "distance",
]


def app_label(tenant: str, app: str) -> str:
    return f"{tenant}/{app}"


def app_labels(
    learned: Iterable[Mapping[str, Any]], history: Iterable[Mapping[str, Any]]
) -> list[str]:
    """Every application the scheduler learned or the history holds, sorted, once each."""
    both = [*learned, *history]
    return sorted({app_label(str(a["tenant"]), str(a["app"])) for a in both})


def learned_graph(app: Mapping[str, Any]) -> tuple[dict[str, int], list[EdgeView]]:
    calls = {str(a["agent"]): int(a["calls"]) for a in app["agents"]}
    started = sum(int(e["count"]) for e in app["edges"] if e["from"] == ENTRY)
    if started:
        calls[ENTRY] = started
    edges = [
        EdgeView(e["from"], e["to"], e["count"], e["frequency"], e["parallel"])
        for e in app["edges"]
    ]
    return calls, edges


def learned_figure(app: Mapping[str, Any]) -> go.Figure:
    calls, edges = learned_graph(app)
    title = f"Agent graph learned from {app['workflows']} workflows"
    return graph_figure(calls, edges, title=title)


def edges_frame(app: Mapping[str, Any]) -> pd.DataFrame:
    """Per edge: calls, frequency (% of the source agent's calls), parallel calls and how
    the graph draws it."""
    columns = ["from", "to", "calls", "frequency %", "parallel", "drawn as"]
    rows = []
    for e in app["edges"]:
        edge = EdgeView(e["from"], e["to"], e["count"], e["frequency"], e["parallel"])
        kind = "parallel" if edge.is_parallel else "sequential"
        rows.append([e["from"], e["to"], e["count"], percent(e["frequency"]), e["parallel"], kind])
    return pd.DataFrame(rows, columns=columns)


def _rounded(value: Any, digits: int = 3) -> float | None:
    return None if value is None else round(float(value), digits)


def priority_frame(app: Mapping[str, Any]) -> pd.DataFrame:
    """The agents in the order the scheduler serves them under kairos (priority 1 first;
    agents not scored yet last, by name)."""
    agents = sorted(
        app["agents"],
        key=lambda a: (a["priority"] is None, a["priority"] or 0, a["agent"]),
    )
    rows = [
        [
            a["priority"],
            a["agent"],
            _rounded(a["score"], 4),
            "yes" if a["converged"] else "no",
            a["samples"],
            _rounded(a["single_mode_s"]),
            _rounded(a["remaining_mean_s"]),
            a["stages"],
            _rounded(a["distance"], 4),
        ]
        for a in agents
    ]
    frame = pd.DataFrame(rows, columns=PRIORITY_COLUMNS)
    return frame.astype({"priority": "Int64"})


def latency_figure(app: Mapping[str, Any], kind: str) -> go.Figure:
    """Per agent, its `single` (one call) or `remaining` (call start to its workflow's end)
    window in seconds, from the published quantiles (whiskers p10–p90)."""
    boxes = [
        Box(a["agent"], (a.get("latency_s") or {}).get(kind) or {})
        for a in sorted(app["agents"], key=lambda a: str(a["agent"]))
    ]
    label = "Single-call" if kind == "single" else "Remaining (call start → workflow end)"
    return box_figure(boxes, f"{label} latency per agent (s)", "p10", "p90")


def ties_note(app: Mapping[str, Any]) -> str | None:
    """Said when agents of the application score the same: kairos breaks a tie by the
    workflows' start, so their priority positions do not order them."""
    by_score: dict[float, list[str]] = {}
    for a in app["agents"]:
        if a["score"] is not None:
            by_score.setdefault(float(a["score"]), []).append(str(a["agent"]))
    tied = [sorted(names) for names in by_score.values() if len(names) > 1]
    if not tied:
        return None
    groups = "; ".join(", ".join(names) for names in sorted(tied))
    return (
        f"Same score: {groups} (an agent ranks by its application's pooled window until its "
        "own converges). kairos serves tied agents in workflow-start order, whatever their "
        "priority positions."
    )


def badges(app: Mapping[str, Any]) -> str:
    """A convergence badge per agent (Streamlit markdown): converged, or still learning."""
    out = []
    for a in sorted(app["agents"], key=lambda a: str(a["agent"])):
        if a["converged"]:
            out.append(f":green-badge[{a['agent']}: converged]")
        else:
            out.append(f":orange-badge[{a['agent']}: learning, {a['samples']} samples]")
    return " ".join(out)


def ago(then: float | None, now: float) -> str:
    return "never" if then is None else f"{max(0.0, now - then):.0f} s ago"


def policy_note(policy: str, scored_at: float | None, now: float) -> str:
    """What the running policy does with what is learned (module docstring)."""
    scored = (
        "none computed by this leader yet"
        if scored_at is None
        else f"last computed {ago(scored_at, now)}"
    )
    if policy == "kairos":
        return (
            "**kairos** serves agents in this priority order (1 first: the least remaining "
            "latency; positions among every agent of every application it ranks), recomputed "
            "at most every 5 s; an agent whose window has not converged is ranked with its "
            f"application's pooled window ({scored})."
        )
    if policy == "ayo":
        return (
            "**ayo** serves agents by remaining stages (fewest first: the `stages` column). "
            f"The priority column is kairos's, computed only while kairos runs ({scored})."
        )
    return (
        f"The running policy, **{policy or 'unknown'}**, does not order by what is learned: "
        "the scheduler learns graphs and latency windows under every policy, and computes "
        f"priorities only while kairos runs ({scored})."
    )
