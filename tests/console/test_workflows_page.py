"""Workflows page: the agent graph and latency distributions of an application."""

from __future__ import annotations

import json
import time

from streamlit.testing.v1 import AppTest

from tests.console.conftest import AdminServer, signed_in
from tests.control_plane.api.admin.test_workflows import qa_rows


def test_workflow_graph_page(admin_server: AdminServer, app_test: AppTest) -> None:
    with admin_server.db.repos() as r:
        r.requests.insert_many(qa_rows(time.time()))
    at = signed_in(app_test, "app_pages/workflows.py")
    assert not at.exception, at.exception
    at.selectbox(key="wf_app").select("acme/qa").run()
    assert not at.exception, at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert (metrics["Calls"], metrics["Workflows"], metrics["Agents"]) == ("21", "10", "3")
    edges = at.dataframe[0].value
    assert set(zip(edges["source"], edges["target"], strict=True)) == {
        ("(entry)", "router"),
        ("router", "math"),
        ("router", "humanities"),
    }
    graph = json.loads(at.get("plotly_chart")[0].proto.spec)
    labels = [t for trace in graph["data"] for t in trace.get("text") or []]
    assert {"router", "math", "humanities"} <= set(labels)
    boxes = json.loads(at.get("plotly_chart")[1].proto.spec)
    assert sorted(trace["name"] for trace in boxes["data"]) == ["humanities", "math", "router"]
