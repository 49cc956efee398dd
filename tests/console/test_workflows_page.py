"""Workflows page: what the scheduler leader learned (graph, priority order, latency windows,
convergence) and the graph rebuilt from the request history, against a served admin API."""

from __future__ import annotations

import json
import time
from typing import Any

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from console import workflow_views
from control_plane.contracts.knobs import PluginChoice
from control_plane.core.ledger import Ledger
from control_plane.scheduler.rebuild import build_core
from tests.console.conftest import AdminServer, publish_core, signed_in
from tests.control_plane.api.admin.test_workflows import qa_rows
from tests.support.qa_workflows import feed_qa


def _frame(at: AppTest, column: str) -> pd.DataFrame:
    frames = [d.value for d in at.dataframe if column in d.value.columns]
    assert frames, f"no dataframe with a {column!r} column"
    return frames[0]


def _frequencies(edges: pd.DataFrame, source: str, target: str) -> dict[tuple[str, str], float]:
    return {(r[source], r[target]): r["frequency %"] for _, r in edges.iterrows()}


def _chart(at: AppTest, key: str) -> dict[str, Any]:
    charts = [c for c in at.get("plotly_chart") if key in c.proto.id]
    assert charts, f"no chart {key}"
    spec: dict[str, Any] = json.loads(charts[0].proto.spec)
    return spec


def publish_learned(admin_server: AdminServer, policy: str, workflows: int) -> float:
    """A real scheduler core under `policy` learns `workflows` QA workflows — router (1 s),
    then math (2 s, 3 in 5) or humanities (6 s) — and publishes its live view, as a leader."""
    core = build_core({"policy": PluginChoice(policy)}, Ledger(), "vtc")
    orch = core.ctx.workflows
    t = feed_qa(orch, workflows, time.time() - 20.0 * workflows - 30.0)
    core.tick(t)  # kairos refreshes its scores here; other policies leave them alone
    publish_core(admin_server, core)
    return t


def test_history_graph_without_a_leader(admin_server: AdminServer, app_test: AppTest) -> None:
    with admin_server.db.repos() as r:
        r.requests.insert_many(qa_rows(time.time()))
    at = signed_in(app_test, "app_pages/workflows.py")
    assert not at.exception, at.exception
    at.selectbox(key="wf_app").select("acme/qa").run()
    assert not at.exception, at.exception
    assert any("No scheduler leader" in i.value for i in at.info)
    metrics = {m.label: m.value for m in at.metric}
    assert (metrics["Calls"], metrics["Workflows"], metrics["Agents"]) == ("21", "10", "3")
    edges = _frame(at, "source")
    freq = _frequencies(edges, "source", "target")
    # over the router's 10 calls (workflow 0 asked both experts)
    assert freq == {("(entry)", "router"): 100.0, ("router", "math"): 60.0,
                    ("router", "humanities"): 50.0}  # fmt: skip
    graph = _chart(at, "wf_graph")
    labels = [t for trace in graph["data"] for t in trace.get("text") or []]
    assert {"router", "math", "humanities"} <= set(labels)
    assert {a["text"] for a in graph["layout"]["annotations"]} >= {"60 % (17 % parallel)"}
    boxes = _chart(at, "wf_single")
    # one box per agent, each at its own x (not every agent at x = 0)
    assert sorted(tuple(trace["x"]) for trace in boxes["data"]) == [
        ("humanities",),
        ("math",),
        ("router",),
    ]


def test_learned_view_under_kairos(admin_server: AdminServer, app_test: AppTest) -> None:
    publish_learned(admin_server, "kairos", 40)
    at = signed_in(app_test, "app_pages/workflows.py")
    at.selectbox(key="wf_app").select("acme/qa").run()
    assert not at.exception, at.exception
    caption = " ".join(c.value for c in at.caption)
    assert "Policy the leader runs: **kairos**" in caption and "40 workflows learned" in caption
    edges = _frame(at, "from")
    freq = _frequencies(edges, "from", "to")
    assert freq == {("(entry)", "router"): 100.0, ("router", "math"): 60.0,
                    ("router", "humanities"): 40.0}  # fmt: skip
    assert set(edges["drawn as"]) == {"sequential"}
    graph = _chart(at, "wf_learned_graph")
    assert {"60 %", "40 %", "100 %"} <= {a["text"] for a in graph["layout"]["annotations"]}
    priority = _frame(at, "priority")
    assert list(priority["priority"]) == [1, 2, 3] and priority["agent"][0] == "math"
    assert set(priority["converged"]) <= {"yes", "no"}
    assert (priority.set_index("agent").loc["math", "single-call mode s"]) == 2.0
    notes = " ".join(m.value for m in at.markdown)
    assert "**kairos** serves agents in this priority order" in notes
    assert "math: converged" in notes
    single = _chart(at, "wf_learned_single")
    medians = {trace["x"][0]: trace["median"][0] for trace in single["data"]}
    assert medians == {"router": 1.0, "math": 2.0, "humanities": 6.0}
    remaining = _chart(at, "wf_learned_remaining")
    assert {trace["x"][0]: trace["upperfence"][0] for trace in remaining["data"]} == {
        "router": 7.0,
        "math": 2.0,
        "humanities": 6.0,
    }


def test_learned_view_says_what_another_policy_does(
    admin_server: AdminServer, app_test: AppTest
) -> None:
    publish_learned(admin_server, "fcfs", 12)
    at = signed_in(app_test, "app_pages/workflows.py")
    at.selectbox(key="wf_app").select("acme/qa").run()
    assert not at.exception, at.exception
    notes = " ".join(m.value for m in at.markdown)
    assert "**fcfs**, does not order by what is learned" in notes
    assert "none computed by this leader yet" in notes
    priority = _frame(at, "priority")
    assert priority["priority"].isna().all()


def test_the_history_says_how_many_rows_it_read(
    admin_server: AdminServer, app_test: AppTest, monkeypatch: pytest.MonkeyPatch
) -> None:
    with admin_server.db.repos() as r:
        r.requests.insert_many(qa_rows(time.time()))
    at = signed_in(app_test, "app_pages/workflows.py")
    at.selectbox(key="wf_app").select("acme/qa").run()
    with admin_server.http() as http:
        calls = http.get("/admin/workflows/qa", params={"tenant": "acme"}).json()["calls"]
    read = f"the {calls} most recent request rows"
    assert any(read in c.value for c in at.caption), [c.value for c in at.caption]
    assert not any("only the" in w.value for w in at.warning)

    monkeypatch.setattr(workflow_views, "HISTORY_ROWS", 10)  # the API reads at most this many
    at.run()
    assert any("only the 10 most recent" in w.value for w in at.warning), at.warning


def test_a_learned_view_from_a_leader_that_stopped_is_flagged_stale(
    admin_server: AdminServer, app_test: AppTest
) -> None:
    """The leader's view stays in Redis after it stops: 'updated 120 s ago' in a caption was
    all the page said above 'the priority order the scheduler uses'."""
    core = build_core({"policy": PluginChoice("kairos")}, Ledger(), "vtc")
    core.tick(feed_qa(core.ctx.workflows, 12, time.time() - 400.0))
    publish_core(admin_server, core, time.time() - 120)
    at = signed_in(app_test, "app_pages/workflows.py")
    at.selectbox(key="wf_app").select("acme/qa").run()
    assert not at.exception, at.exception
    assert any("Stale" in e.value and "12" in e.value for e in at.error), at.error

    publish_learned(admin_server, "kairos", 12)  # a leader publishes again
    at.run()
    assert not [e for e in at.error if "Stale" in e.value]
