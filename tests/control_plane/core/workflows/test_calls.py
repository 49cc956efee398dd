"""Workflow reconstruction on every shape: fan-out parallel and sequential, chain, loop,
dynamic branch — and the Figure 11 trap (sequential siblings are not a chain)."""

from __future__ import annotations

from control_plane.core.workflows.calls import Call, parallel_ids, reconstruct


def edges(calls: list[Call]) -> set[tuple[str, str, bool]]:
    return {(e.parent, e.child, e.parallel) for e in reconstruct(calls).edges}


def test_a_parallel_fan_out_is_marked_parallel() -> None:
    calls = [
        Call("r", "router", None, 0.0, 1.0),
        Call("m", "math", "router", 1.1, 3.0),
        Call("h", "humanities", "router", 1.2, 2.5),
    ]
    assert edges(calls) == {("r", "m", True), ("r", "h", True)}


def test_sequential_siblings_stay_siblings_not_a_chain() -> None:
    """Figure 11: the router calls math, then (after math ends) humanities: both children of
    the router, sequential — not router → math → humanities."""
    calls = [
        Call("r", "router", None, 0.0, 1.0),
        Call("m", "math", "router", 1.1, 2.0),
        Call("h", "humanities", "router", 2.1, 3.0),
    ]
    assert edges(calls) == {("r", "m", False), ("r", "h", False)}
    graph = reconstruct(calls)
    assert graph.roots == ("r",)


def test_a_chain_and_its_remaining_latency() -> None:
    calls = [
        Call("a", "researcher", None, 0.0, 2.0, n_out=100),
        Call("b", "writer", "researcher", 2.5, 6.0, n_out=300),
    ]
    graph = reconstruct(calls)
    assert edges(calls) == {("a", "b", False)}
    assert graph.remaining() == {"a": 6.0, "b": 3.5}
    assert graph.end == 6.0


def test_a_feedback_loop_links_each_round_to_the_latest_finished_upstream() -> None:
    calls = [
        Call("e1", "engineer", "architect", 1.0, 2.0),
        Call("q1", "qa", "engineer", 2.1, 3.0),
        Call("e2", "engineer", "qa", 3.1, 4.0),
        Call("q2", "qa", "engineer", 4.1, 5.0),
        Call("a", "architect", None, 0.0, 0.9),
    ]
    assert edges(calls) == {
        ("a", "e1", False),
        ("e1", "q1", False),
        ("q1", "e2", False),
        ("e2", "q2", False),
    }


def test_a_dynamic_branch_takes_whichever_path_ran() -> None:
    math_path = [Call("r", "router", None, 0, 1), Call("m", "math", "router", 1, 2)]
    other = [Call("r", "router", None, 0, 1), Call("h", "humanities", "router", 1, 4)]
    assert edges(math_path) == {("r", "m", False)}
    assert edges(other) == {("r", "h", False)}


def test_a_call_whose_upstream_was_never_seen_is_a_root() -> None:
    graph = reconstruct([Call("w", "writer", "researcher", 1.0, 2.0)])
    assert graph.roots == ("w",) and not graph.edges


def test_the_sweep_line_counts_back_to_back_spans_as_sequential() -> None:
    spans = [Call("a", "x", "p", 0, 1), Call("b", "x", "p", 1, 2), Call("c", "x", "p", 1.5, 3)]
    assert parallel_ids(spans) == {"b", "c"}
