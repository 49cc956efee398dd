"""Regression: a knob set to a bare JSON number (or any other shape) must not break the audit
log; every later `GET /admin/audit` answers, on SQLite and on PostgreSQL."""

from __future__ import annotations

from typing import Any

from tests.control_plane.api.admin.conftest import AdminApi

VALUES: list[Any] = [28107, 1.0, "x", True, None, [1, "a"], {"n": {"m": 2.5}}, "日本 ✓"]


async def test_bare_number_knob_keeps_the_audit_log_readable(api_any_db: AdminApi) -> None:
    api = api_any_db
    put = await api.client.put("/admin/knobs/g", json={"value": 28107, "reason": "x"})
    assert put.status_code == 200, put.text
    audit = await api.client.get("/admin/audit")
    assert audit.status_code == 200, audit.text
    (entry,) = audit.json()["data"]
    assert entry["target"] == "knob:g" and entry["new"] == 28107 and entry["reason"] == "x"


async def test_every_knob_value_shape_is_audited_as_written(api_any_db: AdminApi) -> None:
    api = api_any_db
    for i, value in enumerate(VALUES):
        put = await api.client.put(f"/admin/knobs/k{i}", json={"value": value, "reason": "r"})
        assert put.status_code == 200, put.text
    audit = await api.client.get("/admin/audit", params={"action": "knob.set"})
    assert audit.status_code == 200, audit.text
    news = {e["target"]: e["new"] for e in audit.json()["data"]}
    assert news == {f"knob:k{i}": v for i, v in enumerate(VALUES)}
    assert [type(news[f"knob:k{i}"]) for i in range(len(VALUES))] == [type(v) for v in VALUES]
