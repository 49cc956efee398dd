"""Workers page: health and load per worker; drain and undrain with a reason."""

from __future__ import annotations

import re
import time

import pytest
from streamlit.testing.v1 import AppTest

from tests.console.conftest import AdminServer, signed_in


def test_workers_table_and_drain(admin_server: AdminServer, app_test: AppTest) -> None:
    with admin_server.http() as http:
        for i in (1, 2):
            body = {
                "url": f"http://127.0.0.1:{60000 + i}",
                "id": f"gpu-{i}",
                "model": "m",
                "max_num_seqs": 32,
                "reason": "capacity",
            }
            assert http.post("/admin/workers", json=body).status_code == 201
    admin_server.set_worker_metrics(
        "gpu-1",
        {"healthy": True, "running": 5, "waiting": 2, "kv_usage": 0.4, "preemptions_total": 3},
        time.time(),
    )
    at = signed_in(app_test, "app_pages/workers.py")
    assert not at.exception, at.exception
    table = at.dataframe[0].value.set_index("id")
    assert table.loc["gpu-1", "healthy"] == "healthy" and table.loc["gpu-2", "healthy"] == "unknown"
    assert (table.loc["gpu-1", "running"], table.loc["gpu-1", "waiting"]) == (5, 2)
    assert table.loc["gpu-1", "preemptions"] == 3 and table.loc["gpu-1", "kv_usage_pct"] == 40.0

    at.selectbox(key="drain_worker").select("gpu-2")
    at.button(key="drain_submit").click().run()
    at.button(key="drain_confirm").click().run()
    assert any("'reason'" in c.value for c in at.caption)  # no reason: refused, shown by it
    at.text_input(key="drain_reason").input("kernel upgrade")
    at.button(key="drain_submit").click().run()
    at.button(key="drain_confirm").click().run()
    assert not at.exception, at.exception
    assert any("gpu-2 is draining" in s.value for s in at.success)
    assert at.dataframe[0].value.set_index("id").loc["gpu-2", "status"] == "draining"
    with admin_server.http() as http:
        rows = {w["id"]: w for w in http.get("/admin/workers").json()["data"]}
    assert rows["gpu-2"]["status"] == "draining" and rows["gpu-1"]["status"] == "active"

    at.selectbox(key="drain_worker").select("gpu-2")
    at.button(key="undrain_submit").click().run()
    at.button(key="drain_confirm").click().run()
    assert at.dataframe[0].value.set_index("id").loc["gpu-2", "status"] == "active"


def test_a_worker_whose_last_scrape_is_old_is_flagged_stale(
    admin_server: AdminServer, app_test: AppTest
) -> None:
    """A scheduler that stopped scraping leaves its last samples behind (no expiry): they are
    flagged, never shown as the worker's health now."""
    with admin_server.http() as http:
        body = {"url": "http://127.0.0.1:60011", "id": "gpu-old", "model": "m", "reason": "r"}
        assert http.post("/admin/workers", json=body).status_code == 201
    sample = {"healthy": True, "running": 5, "waiting": 2, "kv_usage": 0.4}
    admin_server.set_worker_metrics("gpu-old", sample, time.time() - 600)
    at = signed_in(app_test, "app_pages/workers.py")
    assert not at.exception, at.exception
    old = r"6\d\d"  # 600 s, and the seconds the page took (a loaded box)
    errors = [e.value for e in at.error]
    assert any(re.search(rf"gpu-old \({old} s\)", e) and "stale" in e.lower() for e in errors), (
        errors
    )
    row = at.dataframe[0].value.set_index("id").loc["gpu-old"]
    assert re.fullmatch(rf"healthy\? \(stale: {old} s old\)", row["healthy"]), row["healthy"]
    assert row["metrics_age_s"] == pytest.approx(600, abs=60)

    admin_server.set_worker_metrics("gpu-old", sample, time.time())  # scraped again
    at.run()
    assert not [e for e in at.error if "gpu-old" in e.value]
    assert at.dataframe[0].value.set_index("id").loc["gpu-old", "healthy"] == "healthy"
