"""The "Service per model kind" builders: table rows, stacked bars, the one-tenant view; and the
admin client's call to `/admin/reports/service-by-kind`."""

from __future__ import annotations

import time
from typing import Any

import pytest

from console.admin_client import AdminClient
from console.kind_views import COLUMNS, for_tenant, kind_figure, kind_frame, kind_service
from storage.records import RequestRecord
from tests.console.conftest import TOKEN, AdminServer


def _row(tenant: str, kind: str, service: float, share: float) -> dict[str, Any]:
    return {"tenant": tenant, "kind": kind, "requests": 2, "n_in": 10, "n_out": 5,
            "unified_service": service, "share": share}  # fmt: skip


REPORT: dict[str, Any] = {
    "kinds": ["llm", "vlm", "image"],
    "tenants": ["a", "b"],
    "data": [
        _row("a", "llm", 30.0, 0.75),
        _row("a", "vlm", 50.0, 1.0),
        _row("b", "llm", 10.0, 0.25),
        _row("b", "image", 40.0, 1.0),
    ],
}


def test_frame_has_one_row_per_tenant_and_kind() -> None:
    frame = kind_frame(REPORT)
    assert list(frame.columns) == list(COLUMNS)
    assert list(zip(frame["tenant"], frame["kind"], strict=True)) == [
        ("a", "llm"), ("a", "vlm"), ("b", "llm"), ("b", "image"),
    ]  # fmt: skip
    assert frame["unified_service"].sum() == pytest.approx(130.0)
    assert frame.groupby("kind")["share"].sum().to_dict() == {"image": 1.0, "llm": 1.0, "vlm": 1.0}
    assert kind_frame({"data": []}).empty


def test_figure_stacks_each_kind_over_the_tenants() -> None:
    assert kind_service(REPORT, "vlm") == [50.0, 0.0]
    assert kind_service(REPORT, "image") == [0.0, 40.0]
    fig = kind_figure(REPORT)
    assert fig.layout.barmode == "stack"
    assert [t.name for t in fig.data] == ["llm", "vlm", "image"]
    assert all(list(t.x) == ["a", "b"] for t in fig.data)
    heights = [sum(t.y[i] for t in fig.data) for i in range(2)]
    assert heights == [80.0, 50.0]  # every kind of a tenant, stacked


def test_one_tenant_keeps_its_shares_of_every_tenants_service() -> None:
    only_b = for_tenant(REPORT, "b")
    assert only_b["tenants"] == ["b"] and only_b["kinds"] == ["llm", "image"]
    assert [r["share"] for r in only_b["data"]] == [0.25, 1.0]
    assert for_tenant(REPORT, None) == REPORT
    assert (
        for_tenant(REPORT, "nobody")["data"] == [] and for_tenant(REPORT, "nobody")["kinds"] == []
    )


def test_client_reads_service_by_kind(admin_server: AdminServer) -> None:
    now = time.time()
    with admin_server.http() as http:
        spec = {"kind": "audio", "hidden_size": 1024, "num_layers": 12, "reason": "test"}
        assert http.put("/admin/models/whisper-kv", json=spec).status_code == 200
    rows = [
        RequestRecord(id=f"kv{i}", tenant="kv-" + t, model=m, arrival=now - 60 * (i + 1),
                      status="ok", n_in=10 * (i + 1), n_out=i, unified_cost=cost)
        for i, (t, m, cost) in enumerate(
            [("x", "whisper-kv", 30.0), ("y", "whisper-kv", 10.0), ("x", "unknown-kv", 5.0)]
        )
    ]  # fmt: skip
    with admin_server.db.repos() as r:
        r.requests.insert_many(rows)
    report = AdminClient(admin_server.url, TOKEN).service_by_kind(now - 3600, now)
    got = {(d["tenant"], d["kind"]): d for d in report["data"] if d["tenant"].startswith("kv-")}
    assert set(got) == {("kv-x", "audio"), ("kv-y", "audio"), ("kv-x", "llm")}
    assert got["kv-x", "audio"]["share"] == pytest.approx(0.75)
    assert got["kv-y", "audio"]["share"] == pytest.approx(0.25)
    assert (got["kv-x", "llm"]["n_in"], got["kv-x", "llm"]["unified_service"]) == (30, 5.0)
    assert "audio" in report["kinds"]
