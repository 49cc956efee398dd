"""Operator accounts over the real admin API: tokens with roles, the audit log names the
operator (not what the client claims), revocation is immediate, and lookups are cached."""

from __future__ import annotations

import re
from typing import Any

from control_plane.api.operator_auth import STEERING, OperatorTokens
from tests.control_plane.api.admin.conftest import AdminApi


async def _operator(api: AdminApi, name: str, role: str) -> dict[str, str]:
    resp = await api.client.post(
        "/admin/operators", json={"name": name, "role": role, "reason": "onboarding"}
    )
    assert resp.status_code == 201, resp.text
    return {"Authorization": f"Bearer {resp.json()['token']}", "X-Arbiter-Actor": "spoofed"}


def _audit_actor(api: AdminApi, action: str) -> list[str]:
    with api.db.reader() as r:
        return [e.actor for e in r.audit.list(action=action)]


async def test_create_shows_the_token_once_and_is_audited(api: AdminApi) -> None:
    headers = await _operator(api, "ann", "viewer")
    listed = (await api.client.get("/admin/operators")).json()["data"]
    assert [(o["name"], o["role"], o["revoked_at"]) for o in listed] == [("ann", "viewer", None)]
    assert "token" not in listed[0] and headers["Authorization"][7:] not in str(listed)
    assert _audit_actor(api, "operator.create") == ["ops@test"]
    again = await api.client.post(
        "/admin/operators", json={"name": "ann", "role": "admin", "reason": "dup"}
    )
    assert again.status_code == 409
    bad = await api.client.post(
        "/admin/operators", json={"name": "x", "role": "root", "reason": "r"}
    )
    assert bad.status_code == 422


async def test_whoami_names_the_operator_and_the_role(api: AdminApi) -> None:
    headers = await _operator(api, "ann", "operator")
    me = (await api.client.get("/admin/whoami", headers=headers)).json()
    assert me == {"name": "ann", "role": "operator", "bootstrap": False}
    boot = (await api.client.get("/admin/whoami")).json()
    assert boot == {"name": "ops@test", "role": "admin", "bootstrap": True}


async def test_viewer_reads_but_changes_nothing(api: AdminApi) -> None:
    headers = await _operator(api, "vic", "viewer")
    assert (await api.client.get("/admin/policy", headers=headers)).status_code == 200
    resp = await api.client.put(
        "/admin/policy", json={"name": "fcfs", "reason": "try"}, headers=headers
    )
    assert resp.status_code == 403
    err = resp.json()["error"]
    assert err["code"] == "insufficient_role" and "'operator'" in err["message"]
    assert await api.stores.knobs.get("policy") is None
    listing = await api.client.get("/admin/operators", headers=headers)
    assert listing.status_code == 403  # who the operators are is an admin's to know
    assert "'admin'" in listing.json()["error"]["message"]


async def test_a_token_not_shaped_like_an_operator_s_costs_no_query(api: AdminApi) -> None:
    for guess in ("x" * 48, "sk-" + "y" * 45):
        resp = await api.client.get("/admin/policy", headers={"Authorization": f"Bearer {guess}"})
        assert resp.status_code == 401
    tokens: OperatorTokens = api.app.state.operator_tokens
    assert tokens.sql_lookups == 0


async def test_operator_steers_and_the_audit_names_them(api: AdminApi) -> None:
    headers = await _operator(api, "olga", "operator")
    await api.client.post("/admin/tenants", json={"name": "acme", "reason": "setup"})
    weight = await api.client.put(
        "/admin/weights/acme", json={"weight": 3.0, "reason": "more"}, headers=headers
    )
    assert weight.status_code == 200, weight.text
    policy = await api.client.put(
        "/admin/policy", json={"name": "fcfs", "reason": "test"}, headers=headers
    )
    assert policy.status_code == 200, policy.text
    assert _audit_actor(api, "policy.switch") == ["olga"]  # not the client's "spoofed"
    create = await api.client.post(
        "/admin/tenants", json={"name": "other", "reason": "x"}, headers=headers
    )
    assert create.status_code == 403 and create.json()["error"]["code"] == "insufficient_role"


async def test_admin_operator_may_change_anything(api: AdminApi) -> None:
    headers = await _operator(api, "ada", "admin")
    created = await api.client.post(
        "/admin/tenants", json={"name": "acme", "reason": "setup"}, headers=headers
    )
    assert created.status_code == 201
    assert (await _operator_via(api, headers)).status_code == 201
    assert set(_audit_actor(api, "tenant.create")) == {"ada"}


async def _operator_via(api: AdminApi, headers: dict[str, str]) -> Any:
    return await api.client.post(
        "/admin/operators",
        json={"name": "bea", "role": "viewer", "reason": "by ada"},
        headers=headers,
    )


async def test_every_change_route_is_refused_below_its_role(api: AdminApi) -> None:
    viewer = await _operator(api, "vic", "viewer")
    operator = await _operator(api, "olga", "operator")
    paths = api.app.openapi()["paths"]
    checked = 0
    for path, operations in paths.items():
        if not path.startswith("/admin"):
            continue
        url = re.sub(r"\{[^}]+\}", "x", path)
        for method in operations:
            if method.upper() in ("GET", "HEAD"):
                continue
            template = path.removeprefix("/admin").replace("{node}", "{node:path}")
            steering = (method.upper(), template) in STEERING
            resp = await api.client.request(method, url, headers=viewer)
            assert resp.status_code == 403, (method, path)
            if not steering:
                resp = await api.client.request(method, url, headers=operator)
                assert resp.status_code == 403, (method, path)
            checked += 1
    assert checked > 15


async def test_revocation_is_immediate_and_lookups_are_cached(api: AdminApi) -> None:
    headers = await _operator(api, "ann", "viewer")
    for _ in range(5):
        assert (await api.client.get("/admin/policy", headers=headers)).status_code == 200
    tokens: OperatorTokens = api.app.state.operator_tokens
    assert tokens.sql_lookups == 1
    revoked = await api.client.post("/admin/operators/ann/revoke", json={"reason": "left"})
    assert revoked.status_code == 200 and revoked.json()["revoked_at"] is not None
    after = await api.client.get("/admin/policy", headers=headers)
    assert after.status_code == 401 and after.json()["error"]["code"] == "invalid_admin_token"
    assert _audit_actor(api, "operator.revoke") == ["ops@test"]
    missing = await api.client.post("/admin/operators/nobody/revoke", json={"reason": "r"})
    assert missing.status_code == 404


async def test_only_an_admin_may_name_a_plug_in_by_its_module_path(api: AdminApi) -> None:
    """`module:Class` makes every gateway import the module (its top-level code runs on the
    event loop): the power of installing code, not of steering. Refused before the import."""
    import sys

    sys.modules.pop("this", None)
    headers = await _operator(api, "otto", "operator")
    attempts = [
        ("/admin/policy", {"name": "this:X", "reason": "r"}),
        ("/admin/policy", {"name": "this:", "reason": "r"}),  # imported before getattr fails
        ("/admin/knobs/placement", {"value": {"name": "this:X"}, "reason": "r"}),
        ("/admin/knobs/admission", {"value": {"name": "this:1"}, "reason": "r"}),
    ]
    for path, body in attempts:
        resp = await api.client.put(path, json=body, headers=headers)
        assert resp.status_code == 403 and resp.json()["error"]["code"] == "forbidden", resp.text
    assert "this" not in sys.modules
    registered = await api.client.put(
        "/admin/knobs/placement",
        json={"value": {"name": "least_loaded"}, "reason": "r"},
        headers=headers,
    )
    assert registered.status_code == 200, registered.text
    by_admin = await api.client.put(
        "/admin/policy",
        json={"name": "control_plane.policies.fcfs:FcfsPolicy", "reason": "r"},
    )
    assert by_admin.status_code == 200, by_admin.text
