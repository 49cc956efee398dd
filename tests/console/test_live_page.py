"""Live page: live SAFI, credits, counters, queues and SLO attainment per node; drill-down."""

from __future__ import annotations

import ast
import json
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.console.conftest import APP, AdminServer, signed_in

LEDGER_SERVICE = "Service since the leader's ledger began (UT, cumulative)"


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
    assert {LEDGER_SERVICE, "Received over time (UT/s)", "SLO attainment (%)"} <= set(titles)
    slo = _traces(at, "SLO attainment (%)")  # in percent, as the table's columns
    for shown, cell in zip(slo["last minute"], table["SLO attainment 1 min %"], strict=True):
        assert (cell == "—" and shown is None) or float(cell) == pytest.approx(shown, abs=0.05)
    assert "Virtual counters" not in titles and "Virtual counter" not in table  # ExFairS: none
    safi = next(json.loads(c.proto.spec) for c in at.get("plotly_chart") if "SAFI" in c.proto.spec)
    assert safi["layout"]["shapes"], "the β band is drawn"

    at.selectbox(key="live_tenant").select("alpha").run()
    assert list(at.dataframe[0].value["Application"]) == ["chat"]
    at.selectbox(key="live_app").select("chat").run()
    assert list(at.dataframe[0].value["Agent"]) == ["coder", "planner"]
    assert at.selectbox(key="live_tenant").value == "alpha"  # the place is kept across reruns


def test_an_old_snapshot_is_shown_as_stale(admin_server: AdminServer, app_test: AppTest) -> None:
    """A scheduler that stopped publishing: its last numbers are flagged, never shown as now."""
    admin_server.publish_live_state(time.time() - 120)
    at = signed_in(app_test, "app_pages/live.py")
    assert not at.exception, at.exception
    assert any("stale" in e.value and "12" in e.value for e in at.error), [
        e.value for e in at.error
    ]
    metrics = {m.label: m for m in at.metric}
    assert metrics["Leader"].value == "leader-test"  # still said: who published it last
    for label in ("Queued (scheduler)", "In flight", "Jain (tenant SAFI)"):
        assert "stale" in str(metrics[label].proto.delta), label
    assert any("as of" in c.value for c in at.caption)

    admin_server.publish_live_state(time.time())
    at.run()
    assert not [e for e in at.error if "stale" in e.value]
    assert not [m for m in at.metric if "stale" in str(m.proto.delta)]
    assert any("as of" in c.value for c in at.caption)


def test_the_snapshot_says_the_utc_time_it_is_of(
    admin_server: AdminServer, app_test: AppTest
) -> None:
    """With the refresh off the page stays as drawn: 'as of 0 s ago' read as fresh an hour
    later. The caption names the snapshot's UTC time."""
    published = time.time() - 2
    admin_server.publish_live_state(published)
    at = signed_in(app_test, "app_pages/live.py")
    at.selectbox(key="refresh_s").set_value(0.0).run()
    assert not at.exception, at.exception
    stamp = time.strftime("%H:%M:%S", time.gmtime(published))
    assert any(f"as of {stamp} UTC" in c.value for c in at.caption), [c.value for c in at.caption]


def _traces(at: AppTest, title: str) -> dict[str, list[float]]:
    spec = next(
        json.loads(c.proto.spec)
        for c in at.get("plotly_chart")
        if json.loads(c.proto.spec)["layout"]["title"]["text"] == title
    )
    return {trace["name"]: trace["y"] for trace in spec["data"]}


def test_the_range_picker_is_kept_in_the_url_and_drives_the_history(
    admin_server: AdminServer, app_test: AppTest
) -> None:
    now = time.time()
    admin_server.publish_live_state(now)
    admin_server.publish_history([(now - 600 + 5 * i, 10.0 * i) for i in range(120)])
    at = signed_in(app_test, "app_pages/live.py")
    assert not at.exception, at.exception
    assert at.radio(key="live_range").value == "15m" and at.query_params["range"] == "15m"
    service = _traces(at, LEDGER_SERVICE)  # from the history, not this session
    assert service["alpha"][-1] == 1190.0 and len(service["alpha"]) == 120
    assert "Demand vs received (UT/s, the nodes shown)" in _chart_titles(at)

    before = time.time()
    at.radio(key="live_range").set_value("5m").run()
    after = time.time()
    assert at.query_params["range"] == "5m"
    # a point every 5 s up to `now`: 59 or 60 in the last 5 minutes as of `now`, one fewer
    # for each 5 s the page read later (a loaded box took over 10 s to get here)
    most, least = 60 - int((before - now) // 5), 59 - int((after - now) // 5)
    assert least <= len(_traces(at, LEDGER_SERVICE)["alpha"]) <= most

    at.switch_page("app_pages/workers.py").run()
    at.switch_page("app_pages/live.py").run()
    assert at.radio(key="live_range").value == "5m"  # a page switch keeps the range

    reloaded = AppTest.from_file(APP, default_timeout=30)  # a new session: a reload
    reloaded.query_params["range"] = "6h"  # of a deep link
    reloaded = signed_in(reloaded, "app_pages/live.py")
    assert reloaded.radio(key="live_range").value == "6h"
    assert any("SQL minute rollups" in c.value for c in reloaded.caption)
    titles = _chart_titles(reloaded)
    assert "Tokens per second" in titles
    # the rollups' service is summed from the range's start, the ledger's is its lifetime's:
    # one title for both read a million at 1 h and a thousand at 6 h as the same quantity
    assert "Service since the range's start (UT, cumulative)" in titles
    assert LEDGER_SERVICE not in titles


@pytest.mark.parametrize(
    "script", sorted(p.name for p in (Path(APP).parent / "app_pages").glob("*.py"))
)
def test_a_page_script_writes_no_stray_string(script: str) -> None:
    """Streamlit's magic writes every bare string statement of a page script but its docstring
    on the page: an attribute's docstring there showed up as text above the Live page's title."""
    path = Path(APP).parent / "app_pages" / script
    body = ast.parse(path.read_text()).body
    stray = [
        node.lineno
        for node in body[1:]
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    ]
    assert stray == [], f"{script}: bare strings at lines {stray}"
