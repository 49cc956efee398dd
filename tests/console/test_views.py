"""The console's pure builders: schema → form fields, history series, drill-down, tables."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from console.admin_client import AdminApiError, AdminClient
from console.form_specs import field_specs, node_keys, to_json_value
from console.live_views import (
    cell,
    children,
    columns_for,
    flagged,
    history_figures,
    history_query,
    jain_text,
    lines_figure,
    nodes_frame,
    range_key,
    series_frame,
    staleness,
    totals_frame,
    visible_nodes,
)
from console.report_views import jain_figure, report_frame
from control_plane.admission.capacity import CapacityParams
from control_plane.policies.exfairs import ExfairsParams
from control_plane.policies.vtc import VtcParams
from tests.console.conftest import TOKEN, AdminServer


def test_field_specs_from_real_params_schemas() -> None:
    exfairs = {s.name: s for s in field_specs(ExfairsParams.model_json_schema())}
    assert (exfairs["alpha"].kind, exfairs["alpha"].minimum, exfairs["alpha"].maximum) == (
        "number",
        0.0,
        1.0,
    )
    assert exfairs["level"].kind == "integer" and exfairs["level"].default == 1
    vtc = {s.name: s for s in field_specs(VtcParams.model_json_schema())}
    assert vtc["cost_unit"].kind == "enum" and vtc["cost_unit"].options == ("unified", "raw")
    capacity = {s.name: s for s in field_specs(CapacityParams.model_json_schema())}
    cap = capacity["max_concurrency"]
    assert (cap.kind, cap.nullable, cap.minimum) == ("integer", True, 1.0)
    assert capacity["skip_waiting"].kind == "boolean"
    assert to_json_value(cap, None) is None and to_json_value(cap, 4.0) == 4


def _node(key: str, tokens: int = 0) -> dict[str, object]:
    path = key.split("/")
    return {
        "key": key,
        "path": path,
        "level": ("tenant", "app", "agent")[len(path) - 1],
        "counter": 1.0,
        "service": 2.0,
        "tokens_in": tokens,
        "tokens_out": 0,
    }


def test_drill_down_and_history_series() -> None:
    nodes = [_node(k) for k in ("a", "a/x", "a/x/p", "a/y", "b", "b/z", "b/z/q")]
    assert [n["key"] for n in visible_nodes(nodes, None, None)] == ["a", "b"]
    assert [n["key"] for n in visible_nodes(nodes, "a", None)] == ["a/x", "a/y"]
    assert [n["key"] for n in visible_nodes(nodes, "b", "z")] == ["b/z/q"]
    assert children(nodes, "app", ["a"]) == ["x", "y"]
    assert history_query("b", "z") == {"level": "agent", "tenant": "b", "app": "z"}
    assert range_key("6h") == "6h" and range_key("1y") == range_key(None) == "15m"
    points = [
        {"t": t, "key": k, "service_rate": r, "demand_rate": r and 2 * r, "counter": 0.0}
        for t, rates in ((100.0, {"a": 1.0, "b": 3.0}), (105.0, {"a": 2.0, "b": None}))
        for k, r in rates.items()
    ]
    both = totals_frame(points, {"demand": "demand_rate", "received": "service_rate"})
    assert list(both[both["node"] == "received"]["value"]) == [4.0, 2.0]  # a gap adds nothing
    payload = {"fields": ["service_rate", "demand_rate", "counter"], "points": points}
    assert [key for key, _ in history_figures(payload)] == ["rate", "dvr"]  # counters all 0


def test_node_keys_and_report_frame() -> None:
    hierarchy = [
        {
            "tenant": {"name": "t", "weight": 2.0},
            "apps": [
                {"app": {"name": "a", "weight": 1.0}, "agents": [{"name": "g", "weight": 3.0}]}
            ],
        }
    ]
    assert node_keys(hierarchy) == {"t": 2.0, "t/a": 1.0, "t/a/g": 3.0}
    report = {
        "nodes": [
            {
                "key": "t",
                "requests": 3,
                "ttft_ms": {"p50": 1.0, "p95": 2.0, "p99": 3.0},
                "tpot_ms": None,
                "e2e_ms": None,
            }
        ]
    }
    frame = report_frame(report)
    assert frame.loc[0, "ttft_p99_ms"] == 3.0 and frame.loc[0, "requests"] == 3
    assert frame["tpot_p50_ms"].isna().all()  # latency columns say their unit: ms
    assert not [c for c in frame.columns if c.startswith(("ttft", "e2e")) and "_ms" not in c]


def test_client_errors_are_plain(admin_server: AdminServer) -> None:
    client = AdminClient(admin_server.url, TOKEN)
    with pytest.raises(AdminApiError) as caught:
        client.switch_policy("exfairs", {"alpha": 2, "p_max": -1}, "r")
    errors = caught.value.field_errors()
    assert caught.value.status == 422 and set(errors) == {"params.alpha", "params.p_max"}
    with pytest.raises(AdminApiError) as refused:
        AdminClient(admin_server.url, "not-the-token").policy()
    assert refused.value.status == 401 and refused.value.code == "invalid_admin_token"
    with pytest.raises(AdminApiError) as unreachable:
        AdminClient("http://127.0.0.1:1", TOKEN).policy()
    assert unreachable.value.status == 0 and "Cannot reach" in str(unreachable.value)


def test_live_table_cells_and_policy_columns() -> None:
    assert (cell(None, "s"), cell(float("nan"), "rate"), cell(0.1234, "pct")) == ("—", "—", "12.3")
    assert (cell("starved", "status"), cell(1234.56, "rate"), cell(3, "int")) == (
        "🔴 starved",
        "1,234.6",
        "3",
    )
    assert "Credit" in [c[1] for c in columns_for("exfairs")]
    assert "Credit" not in [c[1] for c in columns_for("vtc")]  # no empty credits under vtc
    rows: list[dict[str, Any]] = [
        {"key": "a", "path": ["a"], "level": "tenant", "status": "starved", "wait_p95_s": None},
        {"key": "b", "path": ["b"], "level": "tenant", "status": "over-served"},
    ]
    frame = nodes_frame(rows, "vtc")
    assert list(frame.columns[:2]) == ["Tenant", "Status"]
    assert "Virtual counter" not in frame and "Credit" not in frame
    assert frame.loc[0, "p95 wait (s)"] == "—"
    assert flagged(rows) == {"starved": ["a"], "over-served": ["b"]}


def test_the_client_quotes_every_name_it_puts_in_a_path() -> None:
    """A tenant named `a#b` (made before names were checked in SQL) once sent
    `PUT /admin/weights/a`: httpx dropped the fragment, and tenant `a` changed."""
    seen: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.raw_path.decode())
        return httpx.Response(200, json={})

    client = AdminClient("http://admin.test", TOKEN, transport=httpx.MockTransport(answer))
    client.set_weight("a#b/x?y", 2.0, "r")
    client.update_tenant("a/b", {}, "r")
    client.set_draining("w 1", True, "r")
    assert seen == [
        "/admin/weights/a%23b/x%3Fy",
        "/admin/tenants/a%2Fb",
        "/admin/workers/w%201/drain",
    ]


def test_live_header_reads_honestly() -> None:
    """No active node: no Jain index (not a perfect 1.000); the snapshot's age decides stale;
    chart times are UTC and say so."""
    jain = {"tenant": {"service": 1.0, "safi": 1.0, "nodes": 0}}
    assert jain_text({"jain": jain}) == "—"
    assert jain_text({"jain": {"tenant": {"safi": 0.8123, "nodes": 2}}}) == "0.812"
    assert staleness({"age_s": 0.4}) == (0.4, False)
    assert staleness({"age_s": 30.0}) == (30.0, True)
    assert staleness({"age_s": None}) == (None, False)  # no leader: said elsewhere
    points = [{"t": 100.0, "key": "a", "service_rate": 1.0}]
    figure = lines_figure(series_frame(points, "service_rate"), "Received", "UT/s")
    assert "UTC" in figure.layout.xaxis.title.text
    series = [{"start": 100.0, "jain_service": 0.9}]
    assert "UTC" in jain_figure({"series": series, "jain_service": 0.9}).layout.xaxis.title.text


def test_the_client_sends_expected_only_when_given() -> None:
    bodies: list[dict[str, Any]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return httpx.Response(200, json={})

    client = AdminClient("http://admin.test", TOKEN, transport=httpx.MockTransport(answer))
    client.set_knob("queue_cap", {"default": 8}, "r")
    client.set_knob("queue_cap", {"default": 8}, "r", expected="")
    assert bodies == [
        {"value": {"default": 8}, "reason": "r"},
        {"value": {"default": 8}, "reason": "r", "expected": ""},
    ]
