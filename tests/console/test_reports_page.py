"""Reports page: the per-node table equals the API's report; CSV and JSON downloads; service
per model kind; program-level workflow latencies and preemptions per worker."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import io
import json
import re
import time
from typing import Any

import pandas as pd
import pytest
from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage
from streamlit.testing.v1 import AppTest

from control_plane.state import StateStores
from storage.records import RequestRecord
from tests.console.conftest import AdminServer, signed_in
from tests.control_plane.api.admin.preemption_state import publish_preemptions
from tests.storage.program_rows import SINCE, make_workflow_rows, simulator_metrics


def _rows(now: float) -> list[RequestRecord]:
    return [
        RequestRecord(
            id=f"rp{i}",
            tenant=("north", "south")[i % 2],
            app="chat",
            agent="a",
            arrival=now - 3600 * (i + 1),
            status="ok",
            n_in=100,
            n_out=10 * (i + 1),
            unified_cost=100 + 20 * (i + 1),
            slo_violated=i % 3 == 0,
            e2e_ms=200.0 + i,
            ttft_ms=20.0 + i,
        )
        for i in range(12)
    ]


def test_report_page_table_and_downloads(
    admin_server: AdminServer, app_test: AppTest, monkeypatch: pytest.MonkeyPatch
) -> None:
    with admin_server.db.repos() as r:
        r.requests.insert_many(_rows(time.time()))
    handed: list[tuple[Any, str]] = []
    original = MemoryMediaFileStorage.load_and_get_id

    def record(
        self: MemoryMediaFileStorage, data: Any, mimetype: str, *args: Any, **kw: Any
    ) -> str:
        handed.append((data, mimetype))
        return original(self, data, mimetype, *args, **kw)

    monkeypatch.setattr(MemoryMediaFileStorage, "load_and_get_id", record)
    at = signed_in(app_test, "app_pages/reports.py")
    assert not at.exception, at.exception
    table = at.dataframe[0].value.set_index("node")
    today = dt.datetime.now(dt.UTC).date()
    params = {
        "from": (today - dt.timedelta(days=7)).isoformat(),
        "to": (today + dt.timedelta(days=1)).isoformat(),
        "level": "tenant",
    }
    with admin_server.http() as http:
        report = http.get("/admin/reports", params=params).json()
        csv = http.get("/admin/reports", params={**params, "format": "csv"}).text
    for node in report["nodes"]:
        row = table.loc[node["key"]]
        assert row["requests"] == node["requests"] and row["safi"] == pytest.approx(node["safi"])
        assert row["unified_service"] == pytest.approx(node["unified_service"])
        assert row["e2e_p99_ms"] == pytest.approx(node["e2e_ms"]["p99"])
    assert {"north", "south"} <= set(table.index)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Jain: service / weight"] == f"{report['jain_service']:.3f}"
    labels = [getattr(b, "label", None) for b in at.get("download_button")]
    assert labels == ["Download CSV", "Download JSON"]
    downloads = {mime: data for data, mime in handed}
    csv_data = downloads["text/csv"]
    assert (csv_data.decode() if isinstance(csv_data, bytes) else csv_data) == csv
    assert list(pd.read_csv(io.StringIO(csv))["node"]) == [n["key"] for n in report["nodes"]]

    at.radio(key="rep_level").set_value("agent")
    at.button(key="report_submit").click().run()
    assert list(at.dataframe[0].value["node"]) == ["north/chat/a", "south/chat/a"]


def test_service_per_model_kind_section(admin_server: AdminServer, app_test: AppTest) -> None:
    """The section's table is the API's service per (tenant, kind); the chart stacks kinds."""
    now = time.time()
    with admin_server.http() as http:
        spec = {"kind": "image", "hidden_size": 1280, "num_layers": 24, "reason": "test"}
        assert http.put("/admin/models/pix", json=spec).status_code == 200
    rows = [
        RequestRecord(id=f"kp{i}", tenant=t, app="chat", agent="a", model="pix", status="ok",
                      arrival=now - 600 * (i + 1), n_in=5, n_out=50, unified_cost=cost)
        for i, (t, cost) in enumerate([("north", 300.0), ("south", 100.0), ("north", 200.0)])
    ]  # fmt: skip
    with admin_server.db.repos() as r:
        r.requests.insert_many(rows)
    at = signed_in(app_test, "app_pages/reports.py")
    assert not at.exception, at.exception
    assert "Service per model kind" in [h.value for h in at.subheader]
    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    stacked = next(c for c in charts if c["layout"].get("barmode") == "stack")
    assert {"llm", "image"} <= {bar["name"] for bar in stacked["data"]}
    table = at.dataframe[1].value
    today = dt.datetime.now(dt.UTC).date()
    params = {
        "from": (today - dt.timedelta(days=7)).isoformat(),
        "to": (today + dt.timedelta(days=1)).isoformat(),
    }
    with admin_server.http() as http:
        api = http.get("/admin/reports/service-by-kind", params=params).json()
    assert table.to_dict("records") == [
        {c: d[c] for c in table.columns} for d in api["data"]
    ]  # the API's numbers, unchanged
    image = table[table["kind"] == "image"].set_index("tenant")
    assert image.loc["north", "unified_service"] == pytest.approx(500.0)
    assert image.loc["north", "requests"] == 2 and image.loc["south", "n_out"] == 50
    assert image.loc["north", "share"] == pytest.approx(500.0 / 600.0)
    assert image["share"].sum() == pytest.approx(1.0)

    at.text_input(key="rep_tenant").input("south")
    at.button(key="report_submit").click().run()
    assert not at.exception, at.exception
    assert set(at.dataframe[1].value["tenant"]) == {"south"}


def test_program_level_section(admin_server: AdminServer, app_test: AppTest) -> None:
    """Per application the simulator's program metrics in human units (s, ms/token), rounded;
    preemptions per worker from the leader's live view. (Last: its rows join the module's.)"""
    shift = time.time() - 3 * 3600 - SINCE
    rows = [
        dataclasses.replace(
            r, arrival=r.arrival + shift, finished_at=r.finished_at and r.finished_at + shift
        )
        for r in make_workflow_rows()
    ]
    with admin_server.db.repos() as r:
        r.requests.insert_many(rows)

    async def publish() -> None:
        stores = StateStores.open(admin_server.redis_url, "default")
        try:
            await publish_preemptions(stores, {"w1": 4, "w2": 0}, time.time())
        finally:
            await stores.aclose()

    asyncio.run(publish())
    at = signed_in(app_test, "app_pages/reports.py")
    assert not at.exception, at.exception
    assert "Workflows (program-level)" in [h.value for h in at.subheader]
    today = dt.datetime.now(dt.UTC).date()
    start = dt.datetime.combine(today - dt.timedelta(days=7), dt.time(), dt.UTC).timestamp()
    expected = simulator_metrics(rows, start, start + 8 * 86400)
    table = at.dataframe[2].value.set_index("Application")
    assert list(table.index) == list(expected) == ["acme/chat", "acme/docs", "globex/chat"]
    for app, sim in expected.items():
        row = table.loc[app]
        assert (row["Workflows"], row["Completed"]) == (sim["workflows"], sim["completed"])
        assert row["Calls / workflow"] == round(sim["calls_per_workflow"], 2)
        assert row["E2E mean (s)"] == round(sim["e2e_s"]["mean"], 3)
        assert row["E2E P99 (s)"] == round(sim["e2e_s"]["p99"], 3)
        assert row["Token latency P95 (ms/token)"] == round(sim["token_latency_s"]["p95"] * 1e3, 2)
    preemptions = at.dataframe[3].value.set_index("Worker")
    assert preemptions["Preemptions (since engine start)"].to_dict() == {"w1": 4, "w2": 0}

    at.text_input(key="rep_tenant").input("globex")
    at.button(key="report_submit").click().run()
    assert not at.exception, at.exception
    assert list(at.dataframe[2].value["Application"]) == ["globex/chat"]


def test_a_period_in_which_nobody_was_served_has_no_jain_index(
    admin_server: AdminServer, app_test: AppTest
) -> None:
    """Every request timed out: the API's Jain's index of all-zero service is 1.0, which the
    page showed as a perfectly fair period."""
    now = time.time()
    rows = [
        RequestRecord(
            id=f"idle{i}",
            tenant="idle",
            app="chat",
            agent=agent,
            arrival=now - 600,
            status="timeout",
            unified_cost=0.0,
            slo_violated=True,
        )
        for i, agent in enumerate(("a", "b"))
    ]
    with admin_server.db.repos() as r:
        r.requests.insert_many(rows)
    at = signed_in(app_test, "app_pages/reports.py")
    at.radio(key="rep_level").set_value("agent")
    at.text_input(key="rep_tenant").input("idle")
    at.button(key="report_submit").click().run()
    assert not at.exception, at.exception
    assert list(at.dataframe[0].value["node"]) == ["idle/chat/a", "idle/chat/b"]
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Jain: service / weight"] == "—"
    assert any("Nobody was served" in w.value for w in at.warning), at.warning
    jain = next(
        json.loads(c.proto.spec)
        for c in at.get("plotly_chart")
        if "Jain" in json.loads(c.proto.spec)["layout"]["title"]["text"]
    )
    assert not jain["layout"].get("shapes"), "no 'whole period' line at 1.0"


def test_preemptions_from_a_leader_that_stopped_are_flagged_stale(
    admin_server: AdminServer, app_test: AppTest
) -> None:
    """The leader's live view stays in Redis after it stops: its last preemption counts were
    shown 'as the scheduler leader saw it', with no word of when."""
    with admin_server.db.repos() as r:  # a period with requests (the section follows them)
        r.requests.insert_many(_rows(time.time()))

    async def publish() -> None:
        stores = StateStores.open(admin_server.redis_url, "default")
        try:
            await publish_preemptions(stores, {"w1": 4}, time.time() - 300)
        finally:
            await stores.aclose()

    asyncio.run(publish())
    at = signed_in(app_test, "app_pages/reports.py")
    assert not at.exception, at.exception
    stale = [e.value for e in at.error if re.search(r"Stale: .* published 3\d\d s ago", e.value)]
    assert stale, [e.value for e in at.error]
    assert any(re.search(r"saw it 3\d\d s ago", c.value) for c in at.caption)
