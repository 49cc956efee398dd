"""API keys: the plaintext is shown once, lists show prefixes only, revocation is immediate."""

from __future__ import annotations

from tests.control_plane.api.admin.conftest import AdminApi


async def test_key_shown_once_then_revoked(api_any_db: AdminApi) -> None:
    api = api_any_db
    await api.client.post("/admin/tenants", json={"name": "acme", "reason": "r"})
    created = await api.client.post(
        "/admin/keys", json={"tenant": "acme", "label": "ci", "reason": "ci pipeline"}
    )
    assert created.status_code == 201, created.text
    key = created.json()
    plaintext = key["api_key"]
    assert plaintext.startswith("arb-") and key["prefix"] == plaintext[: len(key["prefix"])]
    directory = api.app.state.directory
    assert await directory.tenant_for_key(plaintext) == "acme"  # now cached

    listed = await api.client.get("/admin/keys", params={"tenant": "acme"})
    assert listed.status_code == 200
    assert plaintext not in listed.text
    [row] = listed.json()["data"]
    assert (row["id"], row["label"], row["revoked_at"]) == (key["id"], "ci", None)
    assert "api_key" not in row and "key_hash" not in row

    revoked = await api.client.post(f"/admin/keys/{key['id']}/revoke", json={"reason": "leaked"})
    assert revoked.status_code == 200 and revoked.json()["revoked_at"] is not None
    assert await directory.tenant_for_key(plaintext) is None  # cache dropped at once
    assert (await api.client.get("/admin/keys")).json()["data"][0]["revoked_at"] is not None

    again = await api.client.post(f"/admin/keys/{key['id']}/revoke", json={"reason": "twice"})
    assert again.status_code == 200
    audit = (await api.client.get("/admin/audit", params={"target": f"key:{key['id']}"})).json()
    assert [a["action"] for a in audit["data"]] == ["key.revoke", "key.create"]
    assert plaintext not in str(audit)


async def test_key_errors(api: AdminApi) -> None:
    unknown = await api.client.post("/admin/keys", json={"tenant": "ghost", "reason": "r"})
    assert unknown.status_code == 404
    assert (
        await api.client.post("/admin/keys/999/revoke", json={"reason": "r"})
    ).status_code == 404
    assert (await api.client.get("/admin/keys", params={"tenant": "ghost"})).status_code == 404
    no_reason = await api.client.post("/admin/keys/1/revoke", json={})
    assert no_reason.status_code == 422 and no_reason.json()["error"]["param"] == "reason"
