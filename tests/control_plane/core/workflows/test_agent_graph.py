"""Agent graphs merged from workflows: call counts, edge frequencies, parallel counts, depth."""

from __future__ import annotations

import pytest

from control_plane.core.workflows.agent_graph import ENTRY, AgentGraph
from control_plane.core.workflows.calls import Call, reconstruct


def qa(i: int, branch: str) -> list[Call]:
    return [
        Call(f"r{i}", "router", None, 0.0, 1.0),
        Call(f"x{i}", branch, "router", 1.1, 2.0),
    ]


def test_edge_frequencies_are_shares_of_the_upstream_calls() -> None:
    graph = AgentGraph()
    for i in range(10):
        graph.add(reconstruct(qa(i, "math" if i < 6 else "humanities")))
    assert graph.frequency("router", "math") == pytest.approx(0.6)
    assert graph.frequency("router", "humanities") == pytest.approx(0.4)
    assert graph.frequency(ENTRY, "router") == 1.0
    g = graph.graph()
    assert g.nodes["router"]["calls"] == 10 and g.edges["router", "math"]["count"] == 6


def test_a_router_that_always_calls_both_gives_one_on_each_edge() -> None:
    graph = AgentGraph()
    for i in range(4):
        calls = [*qa(i, "math"), Call(f"h{i}", "humanities", "router", 1.2, 1.8)]
        graph.add(reconstruct(calls))
    assert graph.frequency("router", "math") == graph.frequency("router", "humanities") == 1.0
    assert graph.graph().edges["router", "math"]["parallel"] == 4


def test_stages_count_a_loop_once() -> None:
    calls = [
        Call("p", "pm", None, 0, 1),
        Call("a", "architect", "pm", 1, 2),
        Call("e1", "engineer", "architect", 2, 3),
        Call("q1", "qa", "engineer", 3, 4),
        Call("e2", "engineer", "qa", 4, 5),
        Call("q2", "qa", "engineer", 5, 6),
    ]
    graph = AgentGraph()
    graph.add(reconstruct(calls))
    assert graph.stages() == {"pm": 3, "architect": 2, "engineer": 1, "qa": 1}


def test_json_round_trip() -> None:
    graph = AgentGraph()
    graph.add(reconstruct([*qa(0, "math"), Call("h", "humanities", "router", 1.2, 1.8)]))
    again = AgentGraph.from_json(graph.to_json())
    assert again.to_json() == graph.to_json()
