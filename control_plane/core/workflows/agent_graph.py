"""An application's agent graph, merged from its reconstructed workflows (Kairos §5.2).

Nodes are agents with the number of calls they served; an edge `a → b` counts the calls of `b`
that a call of `a` triggered, and how many of them ran in parallel with a sibling. An edge's
`frequency` is its count over the calls of `a`: Router → Math 0.6 means 60 % of router calls
led to a math call (a router that always calls both gives 1.0 on each edge, not 0.5).
Calls without an upstream hang off the `ENTRY` node.
"""

from __future__ import annotations

from typing import Any

import networkx as nx

from control_plane.core.workflows.calls import WorkflowGraph

ENTRY = "(entry)"


class AgentGraph:
    """Counts only: adding a workflow is O(calls); reading the graph builds a networkx copy."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}
        self.edges: dict[tuple[str, str], int] = {}
        self.parallel: dict[tuple[str, str], int] = {}
        self.workflows = 0

    def add(self, workflow: WorkflowGraph) -> None:
        agent_of = {c.id: c.agent for c in workflow.calls}
        self.workflows += 1
        self.calls[ENTRY] = self.calls.get(ENTRY, 0) + len(workflow.roots)
        for call in workflow.calls:
            self.calls[call.agent] = self.calls.get(call.agent, 0) + 1
        pairs = [(ENTRY, agent_of[r], False) for r in workflow.roots]
        pairs += [(agent_of[e.parent], agent_of[e.child], e.parallel) for e in workflow.edges]
        for a, b, parallel in pairs:
            self.edges[(a, b)] = self.edges.get((a, b), 0) + 1
            if parallel:
                self.parallel[(a, b)] = self.parallel.get((a, b), 0) + 1

    def frequency(self, a: str, b: str) -> float:
        calls = self.calls.get(a, 0)
        return self.edges.get((a, b), 0) / calls if calls else 0.0

    def graph(self) -> nx.DiGraph:
        """The graph with `calls` on nodes and `count`, `frequency`, `parallel` on edges."""
        g = nx.DiGraph()
        for agent, n in self.calls.items():
            g.add_node(agent, calls=n)
        for (a, b), n in self.edges.items():
            parallel = self.parallel.get((a, b), 0)
            g.add_edge(a, b, count=n, frequency=self.frequency(a, b), parallel=parallel)
        return g

    def stages(self) -> dict[str, int]:
        """Per agent: the most agents on a path after it to an exit, a loop counted once
        (strongly connected components condensed) — Ayo's remaining stages."""
        g = self.graph()
        g.remove_nodes_from([ENTRY])
        dag = nx.condensation(g)
        agents_on_path: dict[int, int] = {}  # the most agents on a path from a component
        for comp in reversed(list(nx.topological_sort(dag))):
            after = max((agents_on_path[k] for k in dag.successors(comp)), default=0)
            agents_on_path[comp] = len(dag.nodes[comp]["members"]) + after
        mapping: dict[str, int] = dag.graph["mapping"]
        return {agent: agents_on_path[comp] - 1 for agent, comp in mapping.items()}

    def to_json(self) -> dict[str, Any]:
        return {
            "workflows": self.workflows,
            "calls": dict(self.calls),
            "edges": [[a, b, n, self.parallel.get((a, b), 0)] for (a, b), n in self.edges.items()],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AgentGraph:
        graph = cls()
        graph.workflows = int(data.get("workflows", 0))
        graph.calls = {str(k): int(v) for k, v in (data.get("calls") or {}).items()}
        for a, b, n, par in data.get("edges") or []:
            graph.edges[(str(a), str(b))] = int(n)
            if par:
                graph.parallel[(str(a), str(b))] = int(par)
        return graph
