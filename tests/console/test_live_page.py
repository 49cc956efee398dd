"""Live page: live SAFI, credits, counters, queues and SLO attainment per node; drill-down."""

from __future__ import annotations

import json
import time

import pytest
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
    assert list(table["Tenant"]) == ["alpha", "beta"]  # the pinned key column: names
    assert {"Demand (UT/s)", "Received (UT/s)", "Entitled %", "p95 wait (s)"} <= set(table)
    assert not {"safi_slo", "service_rate", "key"} & set(table)  # no raw field names
    cells = {str(v) for v in table.to_numpy().ravel()}
    assert not cells & {"None", "nan", "NaN"}  # unknown values read "—"
    # header totals come from the same snapshot as the table
    assert int(metrics["Queued (scheduler)"]) == sum(int(q) for q in table["Queued"]) == 2
    assert int(metrics["In flight"]) == sum(int(q) for q in table["In flight"]) == 2
    beta = table.set_index("Tenant").loc["beta"]
    assert beta["Queued"] == "1" and beta["Status"] in {"🟢 ok", "🔴 starved", "🟠 over-served"}
    shares = [float(str(v)) for v in table["Received %"]]
    assert sum(shares) == pytest.approx(100.0, abs=0.2)
    assert any("Status rule" in c.value for c in at.caption)
    titles = _chart_titles(at)
    assert "Demand, received and entitled (UT/s)" in titles and "Queue wait (s)" in titles
    assert "SAFI (ExFairS: violations and usage)" in titles and "ExFairS credits" in titles
    assert {"Tokens per second", "SLO attainment"} <= set(titles)
    assert "Virtual counters" not in titles and "Virtual counter" not in table  # ExFairS: none
    safi = next(json.loads(c.proto.spec) for c in at.get("plotly_chart") if "SAFI" in c.proto.spec)
    assert safi["layout"]["shapes"], "the β band is drawn"

    at.selectbox(key="live_tenant").select("alpha").run()
    assert list(at.dataframe[0].value["Application"]) == ["chat"]
    at.selectbox(key="live_app").select("chat").run()
    assert list(at.dataframe[0].value["Agent"]) == ["coder", "planner"]
    assert len(at.session_state["live_history"]) >= 3  # one snapshot per refresh
    assert at.selectbox(key="live_tenant").value == "alpha"  # the place is kept across reruns
