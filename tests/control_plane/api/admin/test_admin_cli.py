"""`arbiter admin tenants|keys|report` on a real database, and the functions `arbiter up` uses."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from control_plane.admin import tenancy
from control_plane.admin_cli import register
from storage.db import Database
from tests.control_plane.api.admin.conftest import AdminApi
from tests.control_plane.api.admin.test_reports import SPAN, START, make_rows


@pytest.fixture
def cli() -> typer.Typer:
    app = typer.Typer()
    register(app)
    return app


def _run(cli: typer.Typer, *args: str) -> str:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_tenants_and_keys(cli: typer.Typer, db_url: str) -> None:
    db_opt = ("--database-url", db_url)
    out = _run(cli, "tenants", "create", "acme", "--weight", "2", "--queue-cap", "5", *db_opt)
    key = out.strip().splitlines()[-1]
    db = Database(db_url)
    with db.reader() as r:
        owner = r.keys.resolve(plaintext=key)
    assert owner is not None and (owner.name, owner.weight, owner.queue_cap) == ("acme", 2.0, 5)

    listed = json.loads(_run(cli, "tenants", "list", "--json", *db_opt))
    assert [(t["name"], t["weight"]) for t in listed] == [("acme", 2.0)]
    _run(cli, "tenants", "update", "acme", "--weight", "3", "--reason", "vip", *db_opt)
    second = _run(cli, "keys", "create", "acme", "--label", "ci", *db_opt).strip().splitlines()[-1]
    keys = json.loads(_run(cli, "keys", "list", "--tenant", "acme", "--json", *db_opt))
    assert [k["label"] for k in keys] == ["default", "ci"]
    assert key not in json.dumps(keys) and second not in json.dumps(keys)
    _run(cli, "keys", "revoke", str(keys[1]["id"]), *db_opt)
    with db.reader() as r:
        assert r.keys.resolve(plaintext=second) is None
        assert r.tenants.get_tenant(name="acme").weight == 3.0  # type: ignore[union-attr]
        audit = r.audit.list(target="tenant:acme")
    assert [a.action for a in audit] == ["tenant.update", "tenant.create"]
    assert audit[0].reason == "vip" and audit[0].actor.startswith("cli")

    failed = CliRunner().invoke(cli, ["tenants", "create", "acme", *db_opt])
    assert failed.exit_code == 1 and "already exists" in failed.output
    _run(cli, "tenants", "delete", "acme", "--yes", *db_opt)
    with db.reader() as r:
        assert r.tenants.get_tenant(name="acme") is None
    db.dispose()


def test_create_tenant_with_key_is_reusable(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'a.db'}")
    db.migrate()
    fixed = "arb-demo-key-0123456789abcdefghij"
    assert tenancy.create_tenant_with_key(db, "demo", weight=2.0, plaintext=fixed) == fixed
    assert tenancy.create_tenant_with_key(db, "demo", weight=2.0, plaintext=fixed) == fixed
    fresh = tenancy.create_tenant_with_key(db, "demo")
    assert fresh != fixed
    with db.reader() as r:
        assert r.keys.resolve(plaintext=fresh).name == "demo"  # type: ignore[union-attr]
        assert len(r.keys.list(tenant="demo")) == 2
        assert r.tenants.get_tenant(name="demo").weight == 2.0  # type: ignore[union-attr]
    db.dispose()


async def test_report_command_matches_the_api(
    cli: typer.Typer, api: AdminApi, tmp_path: Path
) -> None:
    """The CLI runs in a thread, as it would in its own process: it must not block the app's
    event loop (the gateway's Redis readers run there)."""
    with api.db.repos() as r:
        r.requests.insert_many(make_rows())
    window = ("--from", str(START), "--to", str(START + SPAN), "--database-url", api.db.url)
    for level in ("tenant", "agent"):
        params = {"from": START, "to": START + SPAN, "level": level}
        from_api = (await api.client.get("/admin/reports", params=params)).json()
        from_cli = json.loads(
            await asyncio.to_thread(_run, cli, "report", "--level", level, *window)
        )
        for doc in (from_api, from_cli):
            doc.pop("generated_at")
        assert from_cli == from_api
    params = {"from": START, "to": START + SPAN, "format": "csv"}
    csv_api = (await api.client.get("/admin/reports", params=params)).text
    assert await asyncio.to_thread(_run, cli, "report", "--format", "csv", *window) == csv_api
    out = tmp_path / "r.html"
    await asyncio.to_thread(_run, cli, "report", "--format", "html", "-o", str(out), *window)
    assert "Jain" in out.read_text() and "plotly" in out.read_text().lower()
    bad = await asyncio.to_thread(CliRunner().invoke, cli, ["report", "--level", "planet", *window])
    assert bad.exit_code == 2
