"""Live page: live SAFI, credits, counters, queues and SLO attainment per node; drill-down."""

from __future__ import annotations

import json
import time

from streamlit.testing.v1 import AppTest

from tests.console.conftest import AdminServer, signed_in


def _chart_titles(at: AppTest) -> list[str]:
    titles = []
    for chart in at.get("plotly_chart"):
        spec = json.loads(chart.proto.spec)
        titles.append(spec["layout"]["title"]["text"])
    return titles


def test_live_page_shows_nodes_and_drills_down(
    admin_server: AdminServer, app_test: AppTest
) -> None:
    admin_server.publish_live_state(time.time())
    at = signed_in(app_test, "app_pages/live.py")
    assert not at.exception, at.exception
    assert at.title[0].value == "Live"
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Leader"] == "leader-test" and metrics["Policy"] == "exfairs"
    table = at.dataframe[0].value
    assert list(table["key"]) == ["alpha", "beta"]
    beta = table.set_index("key").loc["beta"]
    assert beta["safi_slo"] == 1.0 and beta["queued"] == 1 and beta["resource"] > 0
    titles = _chart_titles(at)
    assert "SAFI (lower is better)" in titles and "ExFairS credits" in titles
    assert {"Virtual counters", "Tokens per second", "SLO attainment"} <= set(titles)
    safi = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert safi["layout"]["shapes"], "the β band is drawn"

    at.selectbox(key="live_tenant").select("alpha").run()
    assert list(at.dataframe[0].value["key"]) == ["alpha/chat"]
    at.selectbox(key="live_app").select("chat").run()
    assert list(at.dataframe[0].value["key"]) == ["alpha/chat/coder", "alpha/chat/planner"]
    assert len(at.session_state["live_history"]) >= 3  # one snapshot per refresh
    assert at.selectbox(key="live_tenant").value == "alpha"  # the place is kept across reruns
