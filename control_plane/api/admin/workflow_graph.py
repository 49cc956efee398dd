"""Agent graphs and latency distributions of applications, from request rows (pure).

Per application (docs/algorithms.md §19): nodes are agents, an edge `upstream → agent` counts
the calls that agent received from that upstream, and `frequency` = that count over the
upstream agent's own calls, as the scheduler's learned graph counts it: a router that always
calls both experts gives 1.0 on each edge, not 0.5 (calls without an upstream come from the
`ENTRY` node, whose calls are those rows; an upstream with no row of its own in the period —
only its downstream calls were kept — has no frequency, None). Calls of one workflow that
share an upstream and overlap in time are counted as `parallel`. Per agent: the single-call
latency (arrival → finish) and the remaining latency (call arrival → end of its workflow), each
as count, mean, quantiles and a histogram. The routes give it only calls that ran (storage's
`ran_only`): one withdrawn from the queue (timed out, its client gone) is no call of the graph,
as the scheduler's learned graph has none of them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import networkx as nx
import numpy as np

from storage.records import RequestRecord

ENTRY = "(entry)"
QUANTILES = tuple(range(0, 101, 5))
BINS = 20


def _span(rec: RequestRecord) -> tuple[float, float | None]:
    end = rec.finished_at
    if end is None and rec.e2e_ms is not None:
        end = rec.arrival + rec.e2e_ms / 1000.0
    return rec.arrival, end


def distribution(samples_ms: Sequence[float]) -> dict[str, Any]:
    """Count, mean, quantiles (0, 5, …, 100 %) and a 20-bin histogram of latencies in ms."""
    if not samples_ms:
        return {"count": 0, "mean": None, "quantiles": {}, "histogram": {"edges": [], "counts": []}}
    values = np.asarray(samples_ms, dtype=np.float64)
    counts, edges = np.histogram(values, bins=BINS)
    return {
        "count": int(values.size),
        "mean": float(values.mean()),
        "quantiles": {f"p{q}": float(np.percentile(values, q)) for q in QUANTILES},
        "histogram": {"edges": edges.tolist(), "counts": counts.tolist()},
    }


def apps_summary(rows: Iterable[RequestRecord]) -> list[dict[str, Any]]:
    """Per (tenant, app): calls, workflows, agents, first and last arrival."""
    acc: dict[tuple[str, str], dict[str, Any]] = {}
    for rec in rows:
        entry = acc.setdefault(
            (rec.tenant, rec.app),
            {"calls": 0, "workflows": set(), "agents": set(), "first": rec.arrival, "last": 0.0},
        )
        entry["calls"] += 1
        entry["agents"].add(rec.agent)
        if rec.workflow:
            entry["workflows"].add(rec.workflow)
        entry["first"] = min(entry["first"], rec.arrival)
        entry["last"] = max(entry["last"], rec.arrival)
    return [
        {
            "tenant": tenant,
            "app": app,
            "calls": e["calls"],
            "workflows": len(e["workflows"]),
            "agents": sorted(e["agents"]),
            "first_arrival": e["first"],
            "last_arrival": e["last"],
        }
        for (tenant, app), e in sorted(acc.items())
    ]


def _parallel_calls(rows: Sequence[RequestRecord]) -> dict[tuple[str, str], int]:
    """Per edge, calls overlapping in time with a sibling (same workflow and upstream)."""
    siblings: dict[tuple[str, str], list[RequestRecord]] = defaultdict(list)
    for rec in rows:
        if rec.workflow:
            siblings[(rec.workflow, rec.upstream or ENTRY)].append(rec)
    parallel: dict[tuple[str, str], int] = defaultdict(int)
    for (_, upstream), calls in siblings.items():
        spans = sorted((_span(c), c.agent) for c in calls)
        overlapping: set[int] = set()
        latest_end, latest_i = float("-inf"), -1
        for i, ((start, end), _) in enumerate(spans):
            if start < latest_end:
                overlapping.update({i, latest_i})
            if end is not None and end > latest_end:
                latest_end, latest_i = end, i
        for i in overlapping:
            parallel[(upstream, spans[i][1])] += 1
    return parallel


def _remaining_ms(rows: Sequence[RequestRecord]) -> dict[str, list[float]]:
    ends: dict[str, float] = {}
    for rec in rows:
        _, end = _span(rec)
        if rec.workflow and end is not None:
            ends[rec.workflow] = max(ends.get(rec.workflow, end), end)
    out: dict[str, list[float]] = defaultdict(list)
    for rec in rows:
        if rec.workflow in ends:
            out[rec.agent].append(max(0.0, (ends[rec.workflow] - rec.arrival) * 1000.0))
    return out


def _layout(graph: nx.DiGraph) -> dict[str, tuple[int, int]]:
    """(depth, row): depth = shortest hop count from the entry, rows stacked per depth."""
    depth = nx.single_source_shortest_path_length(graph, ENTRY) if ENTRY in graph else {}
    deepest = max(depth.values(), default=0)
    rows: dict[int, int] = defaultdict(int)
    out: dict[str, tuple[int, int]] = {}
    for node in sorted(graph.nodes, key=lambda n: (depth.get(n, deepest + 1), str(n))):
        d = depth.get(node, deepest + 1)
        out[node] = (d, rows[d])
        rows[d] += 1
    return out


def app_graph(rows: Sequence[RequestRecord]) -> dict[str, Any]:
    """The agent graph of one application's calls, with per-agent latency distributions."""
    graph: nx.DiGraph = nx.DiGraph()
    for rec in rows:
        source = rec.upstream or ENTRY
        if graph.has_edge(source, rec.agent):
            graph[source][rec.agent]["count"] += 1
        else:
            graph.add_edge(source, rec.agent, count=1)
    parallel = _parallel_calls(rows)
    single: dict[str, list[float]] = defaultdict(list)
    for rec in rows:
        start, end = _span(rec)
        if end is not None:
            single[rec.agent].append(max(0.0, (end - start) * 1000.0))
    remaining = _remaining_ms(rows)
    positions = _layout(graph)
    calls = {n: sum(d["count"] for _, _, d in graph.in_edges(n, data=True)) for n in graph.nodes}
    if ENTRY in graph:  # the entry's "calls" are the calls it started (rows with no upstream)
        calls[ENTRY] = sum(d["count"] for _, _, d in graph.out_edges(ENTRY, data=True))
    edges = [
        {
            "source": source,
            "target": target,
            "count": data["count"],
            "frequency": data["count"] / calls[source] if calls[source] else None,
            "parallel": parallel.get((source, target), 0),
        }
        for source, target, data in sorted(graph.edges(data=True))
    ]
    nodes = [
        {"id": n, "calls": calls[n], "depth": positions[n][0], "row": positions[n][1]}
        for n in sorted(graph.nodes, key=lambda n: positions[n])
    ]
    agents = {
        agent: {
            "single": distribution(single.get(agent, [])),
            "remaining": distribution(remaining.get(agent, [])),
        }
        for agent in sorted({r.agent for r in rows})
    }
    workflows = {r.workflow for r in rows if r.workflow}
    return {
        "calls": len(rows),
        "workflows": len(workflows),
        "acyclic": nx.is_directed_acyclic_graph(graph),
        "nodes": nodes,
        "edges": edges,
        "agents": agents,
    }
