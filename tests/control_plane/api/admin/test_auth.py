"""The admin API refuses callers without the admin token, and is off without one configured."""

from __future__ import annotations

import re
from pathlib import Path

import httpx

from control_plane.api.app import create_app
from control_plane.settings import Settings
from storage.db import Database
from tests.control_plane.api.admin.conftest import AdminApi

ROUTES = ("/admin/tenants", "/admin/state", "/admin/policy", "/admin/reports", "/admin/audit")


async def test_missing_or_wrong_token_is_401(api: AdminApi) -> None:
    for route in ROUTES:
        missing = await api.client.get(route, headers={"Authorization": ""})
        wrong = await api.client.get(route, headers={"Authorization": "Bearer nope"})
        assert missing.status_code == 401, route
        assert wrong.status_code == 401, route
        assert wrong.json()["error"]["code"] == "invalid_admin_token"
        assert wrong.headers["www-authenticate"] == "Bearer"


async def test_every_admin_route_needs_the_token(api: AdminApi) -> None:
    paths = {p: ops for p, ops in api.app.openapi()["paths"].items() if p.startswith("/admin")}
    assert len(paths) > 25
    for path, operations in paths.items():
        url = re.sub(r"\{[^}]+\}", "x", path)
        for method in operations:
            resp = await api.client.request(method, url, headers={"Authorization": "Bearer no"})
            assert resp.status_code == 401, (method, path)


async def test_tenant_api_key_is_not_an_admin_token(api: AdminApi) -> None:
    created = await api.client.post("/admin/tenants", json={"name": "acme", "reason": "setup"})
    assert created.status_code == 201
    key = (await api.client.post("/admin/keys", json={"tenant": "acme", "reason": "k"})).json()
    resp = await api.client.get(
        "/admin/tenants", headers={"Authorization": f"Bearer {key['api_key']}"}
    )
    assert resp.status_code == 401


async def test_admin_api_disabled_without_token_is_403(redis_url: str, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    db = Database(url)
    db.migrate()
    app = create_app(Settings(redis_url=redis_url, database_url=url, admin_token=""), db=db)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://arbiter.test"
        ) as client,
    ):
        resp = await client.get("/admin/tenants", headers={"Authorization": "Bearer x"})
    db.dispose()
    assert resp.status_code == 403
    assert resp.json()["error"]["code"] == "admin_disabled"
