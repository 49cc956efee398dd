"""What the workflow orchestrator learned, as the JSON the leader's live checkpoint publishes
every second (`learned`), for `GET /admin/learned/workflows` and the console's Workflows page.

Per application: the agent graph (calls per agent; per edge its count, its frequency — the
count over the source agent's calls — and how many of those calls ran in parallel with a
sibling), and per agent the remaining-latency window's size and convergence, the single-call
latency mode, the remaining stages, the priority score and its rank among all agents
(`priority`: 1 = served first under kairos), and both latency windows as `QUANTILES`.

Rule: cheap enough for a 1-s publish — one `np.quantile` per window (windows are bounded),
the KDE mode cached by the orchestrator; values rounded to 0.1 ms so the document stays small.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from control_plane.core.workflows.agent_graph import ENTRY, AgentGraph
from control_plane.core.workflows.samples import Samples

if TYPE_CHECKING:
    from control_plane.core.workflows.orchestrator import AgentKey, AppKey, Orchestrator

QUANTILES = (0, 10, 25, 50, 75, 90, 100)
"""Percentiles published per latency window (a box plot: whiskers p10–p90, min and max)."""
_LEVELS = np.asarray(QUANTILES, dtype=np.float64) / 100.0


def quantiles(samples: Samples | None) -> dict[str, float] | None:
    """`{"p0": …, "p10": …, …, "p100": …}` of the window in seconds; None while empty."""
    if samples is None or not samples.values:
        return None
    values = np.quantile(samples.array(), _LEVELS)
    return {f"p{q}": round(float(v), 4) for q, v in zip(QUANTILES, values, strict=True)}


def _mean(samples: Samples | None) -> float | None:
    return round(float(np.mean(samples.array())), 4) if samples and samples.values else None


def _agent(orch: Orchestrator, key: AgentKey, calls: int, priority: int | None) -> dict[str, Any]:
    stats = orch.agents.get(key)
    single = stats.single if stats else None
    remaining = stats.remaining if stats else None
    return {
        "agent": key[2],
        "calls": calls,
        "samples": remaining.seen if remaining else 0,
        "converged": bool(remaining and remaining.converged),
        "distance": remaining.distance if remaining else None,
        "remaining_mean_s": _mean(remaining),
        "single_mode_s": orch.single_call_mode(key),
        "stages": orch.stages(key),
        "score": orch.scores.get(key),
        "priority": priority,
        "latency_s": {"single": quantiles(single), "remaining": quantiles(remaining)},
    }


def _edges(graph: AgentGraph) -> list[dict[str, Any]]:
    return [
        {
            "from": a,
            "to": b,
            "count": n,
            "frequency": graph.frequency(a, b),
            "parallel": graph.parallel.get((a, b), 0),
        }
        for (a, b), n in sorted(graph.edges.items())
    ]


def learned(orch: Orchestrator) -> list[dict[str, Any]]:
    """Per application (sorted by tenant, app): see the module docstring. `scored_at` is when
    the scores were last computed (None: never, in this leader's memory)."""
    order = sorted(orch.scores, key=lambda k: (orch.scores[k], k))
    position = {key: i + 1 for i, key in enumerate(order)}
    out = []
    for app, graph in sorted(orch.graphs.items()):
        agents = [
            _agent(orch, _key(app, name), graph.calls[name], position.get(_key(app, name)))
            for name in sorted(a for a in graph.calls if a != ENTRY)
        ]
        out.append(
            {
                "tenant": app[0],
                "app": app[1],
                "workflows": graph.workflows,
                "scored_at": orch.scored_at,
                "agents": agents,
                "edges": _edges(graph),
            }
        )
    return out


def _key(app: AppKey, agent: str) -> AgentKey:
    return (app[0], app[1], agent)
