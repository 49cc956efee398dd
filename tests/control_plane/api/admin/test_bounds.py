"""Every number and name the admin API stores is bounded: 422 naming the field, never a 5xx.

Each case below answered 500 (or dropped the connection) before: integers past SQL INTEGER or
BIGINT, worker URLs whose host `urlsplit` cannot parse, and path ids past 64 bits.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.control_plane.api.admin.conftest import AdminApi

WORKER = {"url": "http://127.0.0.1:1", "id": "w1", "model": "tiny", "reason": "r"}
MODEL = {"hidden_size": 64, "num_layers": 2, "reason": "r"}

CASES: list[tuple[str, str, dict[str, Any], str]] = [
    ("POST", "/admin/workers", {**WORKER, "max_num_seqs": 2.4e20}, "max_num_seqs"),
    ("POST", "/admin/workers", {**WORKER, "kv_tokens": 10**20}, "kv_tokens"),
    ("POST", "/admin/workers", {**WORKER, "url": "http://["}, "url"),
    ("POST", "/admin/workers", {**WORKER, "url": "http://h:99999"}, "url"),
    ("POST", "/admin/workers", {**WORKER, "url": "http://a_b:80"}, "url"),
    ("POST", "/admin/workers", {**WORKER, "url": "http://u@h:80"}, "url"),
    ("POST", "/admin/workers", {**WORKER, "id": "evil\n"}, "id"),
    ("POST", "/admin/tenants", {"name": "t", "queue_cap": 10**19, "reason": "r"}, "queue_cap"),
    ("POST", "/admin/tenants", {"name": "t", "token_budget": 2**63, "reason": "r"}, "token_budget"),
    (
        "POST",
        "/admin/tenants",
        {"name": "t", "priority_tier": 1001, "reason": "r"},
        "priority_tier",
    ),
    ("POST", "/admin/tenants", {"name": "t", "weight": 1e300, "reason": "r"}, "weight"),
    ("POST", "/admin/tenants", {"name": "t", "slo_ttft_ms": 1e300, "reason": "r"}, "slo_ttft_ms"),
    ("POST", "/admin/tenants", {"name": "evil\n", "reason": "r"}, "name"),
    # JSON true is not a number: lax parsing took it as 1.0 ms, a 1-ms SLO nobody asked for
    ("POST", "/admin/tenants", {"name": "t", "slo_tpot_ms": True, "reason": "r"}, "slo_tpot_ms"),
    ("POST", "/admin/tenants", {"name": "t", "weight": "2", "reason": "r"}, "weight"),
    ("POST", "/admin/tenants", {"name": "t", "queue_cap": True, "reason": "r"}, "queue_cap"),
    ("PUT", "/admin/models/m", {**MODEL, "hidden_size": 10**19}, "hidden_size"),
    ("PUT", "/admin/models/m", {**MODEL, "max_model_len": 2**31}, "max_model_len"),
    ("PUT", "/admin/models/m", {**MODEL, "unified_cost_factor": True}, "unified_cost_factor"),
    ("PUT", "/admin/models/m", {**MODEL, "image_tokens": {"patch_size": True}}, "image_tokens"),
    ("PUT", "/admin/models/m", {**MODEL, "generation": {"steps": "28"}}, "generation"),
    ("POST", "/admin/keys/68566020055388507907031040/revoke", {"reason": "r"}, "key_id"),
    ("PUT", "/admin/knobs/queue_cap", {"value": {"default": 10**20}, "reason": "r"}, "value"),
    ("PUT", "/admin/knobs/x%0A", {"value": 1, "reason": "r"}, "name"),
]


@pytest.mark.parametrize(("method", "path", "body", "param"), CASES)
async def test_out_of_bounds_values_are_422_naming_the_field(
    api: AdminApi, method: str, path: str, body: dict[str, Any], param: str
) -> None:
    resp = await api.client.request(method, path, json=body)
    assert resp.status_code == 422, resp.text
    got = resp.json()
    assert set(got["error"]) == {"message", "type", "param", "code"}
    assert got["error"]["param"].startswith(param), got
    if "errors" in got:
        assert got["errors"][0]["param"].startswith(param)


@pytest.mark.parametrize(
    ("path", "query"),
    [
        ("/admin/audit", "since=inf"),
        ("/admin/workflows", "until=1e300"),
        ("/admin/reports", "to=1e300"),
    ],
)
async def test_times_are_finite_epochs(api: AdminApi, path: str, query: str) -> None:
    resp = await api.client.get(f"{path}?{query}")
    assert resp.status_code == 422, resp.text
    assert resp.json()["error"]["param"] == query.split("=")[0]


async def test_worker_without_id_needs_a_nameable_address(api: AdminApi) -> None:
    body = {"url": "http://[::1]:8000", "model": "tiny", "reason": "r"}
    resp = await api.client.post("/admin/workers", json=body)
    assert resp.status_code == 422, resp.text
    assert resp.json()["errors"][0]["param"] == "id"
    ok = await api.client.post("/admin/workers", json={**body, "id": "v6"})
    assert ok.status_code == 201, ok.text


async def test_a_nul_in_free_text_is_a_422_naming_the_field(api_any_db: AdminApi) -> None:
    """PostgreSQL's text refuses U+0000: a reason or a label carrying one was a 500 there (the
    change refused after it was checked), a silent NUL stored on SQLite."""
    client = api_any_db.client
    bad = await client.post("/admin/tenants", json={"name": "acme", "reason": "a\x00b"})
    assert bad.status_code == 422 and bad.json()["error"]["param"] == "reason", bad.text
    await client.post("/admin/tenants", json={"name": "acme", "reason": "r"})
    gone = await client.delete("/admin/tenants/acme", params={"reason": "x\x00y"})
    assert gone.status_code == 422 and gone.json()["error"]["param"] == "reason", gone.text
    assert (await client.get("/admin/tenants/acme")).status_code == 200
    label = await client.post(
        "/admin/workers",
        json={"url": "http://127.0.0.1:9", "model": "m", "label": "w\x00", "reason": "r"},
    )
    assert label.status_code == 422 and label.json()["error"]["param"] == "label", label.text
