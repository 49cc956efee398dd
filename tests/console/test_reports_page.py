"""Reports page: the per-node table equals the API's report; CSV and JSON downloads."""

from __future__ import annotations

import datetime as dt
import io
import time
from typing import Any

import pandas as pd
import pytest
from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage
from streamlit.testing.v1 import AppTest

from storage.records import RequestRecord
from tests.console.conftest import AdminServer, signed_in


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
        assert row["e2e_p99"] == pytest.approx(node["e2e_ms"]["p99"])
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
