"""The Workflows page's pure builders: the agent graph (layout, frequency labels over the
source agent's calls, parallel edges drawn apart), one latency box per agent at its own x,
the priority order and what the running policy does with it."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from console import learned_views as learned
from console import workflow_views as views
from control_plane.api.admin.workflow_graph import app_graph
from control_plane.core.workflows.orchestrator import Orchestrator
from storage.records import RequestRecord
from tests.control_plane.core.workflows.test_orchestrator import call
from tests.support.qa_workflows import history_call


def both_experts_rows(n: int) -> list[RequestRecord]:
    """`n` workflows whose router always asks math and humanities at once."""
    rows = []
    for w in range(n):
        t = w * 100.0
        rows.append(history_call(3 * w, f"wf{w}", "router", None, t, 1.0))
        rows.append(history_call(3 * w + 1, f"wf{w}", "math", "router", t + 1, 2.0 + w % 3))
        rows.append(history_call(3 * w + 2, f"wf{w}", "humanities", "router", t + 1, 6.0 + w % 4))
    return rows


def learned_qa(n: int = 40) -> dict[str, Any]:
    """What a real orchestrator publishes after `n` workflows router → math | humanities
    (alternating), every fifth one asking both experts at once."""
    orch = Orchestrator(idle_s=5.0)
    t = 0.0
    for i in range(n):
        call(orch, f"w{i}", "router", None, t, 1.0)
        experts = ["math", "humanities"] if i % 5 == 0 else [("math", "humanities")[i % 2]]
        for expert in experts:
            call(orch, f"w{i}", expert, "router", t + 1.0, 2.0 if expert == "math" else 7.0)
        t += 20.0
        orch.tick(t)
    orch.refresh(t)
    (qa,) = orch.learned()
    return qa


def _labels(fig: go.Figure) -> set[str]:
    return {a.text for a in fig.layout.annotations}


def test_history_edges_read_over_the_source_agent_s_calls() -> None:
    """The operator's complaint: a router that always asks both experts read 50 % on each."""
    graph = app_graph(both_experts_rows(10))
    frame = views.edges_frame(graph)
    freq = {(r.source, r.target): r._4 for r in frame.itertuples()}
    assert freq == {("(entry)", "router"): 100.0, ("router", "math"): 100.0,
                    ("router", "humanities"): 100.0}  # fmt: skip
    fig = views.history_figure(graph)
    assert _labels(fig) == {"100 %"}
    # they ran at once: drawn as parallel (dashed, the parallel colour)
    dashed = [t for t in fig.data if t.mode == "lines+markers" and t.line.dash == "dash"]
    assert len(dashed) == 2 and {t.line.color for t in dashed} == {views.PARALLEL_COLOUR}


def test_history_boxes_one_per_agent_at_its_own_x() -> None:
    graph = app_graph(both_experts_rows(10))
    for kind in ("single", "remaining"):
        fig = views.latency_figure(graph, kind)
        xs = [tuple(t.x) for t in fig.data]
        assert sorted(xs) == [("humanities",), ("math",), ("router",)]
        assert fig.layout.xaxis.type == "category"
    single = {t.x[0]: t for t in views.latency_figure(graph, "single").data}
    assert single["router"].median == (1000.0,)
    assert single["math"].lowerfence[0] <= single["math"].q1[0] <= single["math"].median[0]


def test_layout_runs_left_to_right_from_the_entry() -> None:
    calls, edges = learned.learned_graph(learned_qa())
    pos = views.layout(calls, edges)
    assert pos["(entry)"][0] < pos["router"][0] < pos["math"][0] == pos["humanities"][0]
    assert pos["math"][1] != pos["humanities"][1]
    # a loop (engineer ⇄ qa) and an agent nobody reaches from the entry still get a place
    loop = [
        views.EdgeView("engineer", "qa", 3, 1.0, 0),
        views.EdgeView("qa", "engineer", 2, 0.6, 0),
    ]
    pos = views.layout({"engineer": 3, "qa": 3, "lonely": 1}, loop)
    assert len(set(pos.values())) == 3


def test_learned_graph_labels_and_edges() -> None:
    qa = learned_qa()
    fig = learned.learned_figure(qa)
    # 40 router calls: 16 math alone, 16 humanities alone and 8 asking both at once
    edges = {(e["from"], e["to"]): e for e in qa["edges"]}
    math, hum = edges[("router", "math")], edges[("router", "humanities")]
    assert (math["count"], hum["count"]) == (24, 24)
    assert "60 % (33 % parallel)" in _labels(fig) and "100 %" in _labels(fig)
    names = {t.name for t in fig.data if t.name}
    assert names == {"sequential call", "parallel calls"}
    nodes = next(t for t in fig.data if t.mode == "markers+text")
    sizes = dict(zip(nodes.text, nodes.marker.size, strict=True))
    assert sizes["router"] > sizes["math"]
    frame = learned.edges_frame(qa)
    row = frame[(frame["from"] == "router") & (frame["to"] == "math")].iloc[0]
    assert (row["calls"], row["frequency %"], row["parallel"], row["drawn as"]) == (
        24,
        60.0,
        8,
        "sequential",
    )


def test_learned_boxes_priority_and_badges() -> None:
    qa = learned_qa()
    fig = learned.latency_figure(qa, "single")
    boxes = {t.x[0]: t for t in fig.data}
    assert set(boxes) == {"router", "math", "humanities"}
    assert boxes["humanities"].median == (7.0,) and boxes["router"].upperfence == (1.0,)
    frame = learned.priority_frame(qa)
    assert list(frame.columns) == learned.PRIORITY_COLUMNS
    assert list(frame["priority"]) == [1, 2, 3]
    by_score = sorted(qa["agents"], key=lambda a: a["score"])
    assert list(frame["agent"]) == [a["agent"] for a in by_score]
    assert frame["agent"][0] == "math"  # the least left of its workflow: served first
    converged = dict(zip(frame["agent"], frame["converged"], strict=True))
    badges = learned.badges(qa)
    for agent, flag in converged.items():
        state = "converged" if flag == "yes" else "learning"
        assert f"{agent}: {state}" in badges


def test_unscored_agents_come_last_and_the_policy_note_says_who_reads_it() -> None:
    orch = Orchestrator(idle_s=5.0)
    call(orch, "w0", "router", None, 0.0, 1.0)
    orch.tick(10.0)
    (qa,) = orch.learned()
    frame = learned.priority_frame(qa)
    assert frame["priority"].isna().all() and list(frame["agent"]) == ["router"]
    assert "learning, 1 samples" in learned.badges(qa)
    assert "**kairos** serves agents in this priority order" in learned.policy_note(
        "kairos", 95.0, 100.0
    )
    assert "last computed 5 s ago" in learned.policy_note("kairos", 95.0, 100.0)
    assert "remaining stages" in learned.policy_note("ayo", None, 100.0)
    vtc = learned.policy_note("vtc", None, 100.0)
    assert "**vtc**, does not order by what is learned" in vtc and "none computed" in vtc


def test_app_labels_union_of_learned_and_history() -> None:
    labels = learned.app_labels(
        [{"tenant": "acme", "app": "qa"}],
        [{"tenant": "acme", "app": "qa"}, {"tenant": "beta", "app": "rag"}],
    )
    assert labels == ["acme/qa", "beta/rag"]


def test_equal_scores_are_called_out() -> None:
    """Before any agent's window converges every agent ranks by the pooled window: the page
    says the order is the workflows' start, not the priority column."""
    orch = Orchestrator(idle_s=5.0)
    for i in range(3):
        call(orch, f"w{i}", "router", None, 20.0 * i, 1.0)
        call(orch, f"w{i}", "math", "router", 20.0 * i + 1, 2.0)
    orch.tick(100.0)
    orch.refresh(100.0)
    (qa,) = orch.learned()
    assert len({a["score"] for a in qa["agents"]}) == 1
    assert learned.ties_note(qa) == (
        "Same score: math, router (an agent ranks by its application's pooled window until "
        "its own converges). kairos serves tied agents in workflow-start order, whatever "
        "their priority positions."
    )
    assert learned.ties_note(learned_qa()) is None
