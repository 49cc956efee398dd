"""`arbiter admin operators create|list|revoke` on a real database: the token printed once
authenticates on the real admin API with its role until revoked; every change is audited."""

from __future__ import annotations

import asyncio
import json

import typer
from typer.testing import CliRunner

from control_plane.admin_cli import register
from tests.control_plane.api.admin.conftest import AdminApi


def _run(cli: typer.Typer, *args: str, code: int = 0) -> str:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == code, result.output
    return result.output


async def test_create_list_revoke(api: AdminApi) -> None:
    cli = typer.Typer()
    register(cli)
    db_opt = ("--database-url", api.db.url)
    out = _run(cli, "operators", "create", "olga", "--role", "operator", *db_opt)
    token = out.strip().splitlines()[-1]
    assert token.startswith("arbop-")
    headers = {"Authorization": f"Bearer {token}"}
    me = (await api.client.get("/admin/whoami", headers=headers)).json()
    assert (me["name"], me["role"]) == ("olga", "operator")
    listed = json.loads(_run(cli, "operators", "list", "--json", *db_opt))
    assert [(o["name"], o["role"], o["revoked_at"]) for o in listed] == [("olga", "operator", None)]
    assert token not in json.dumps(listed)
    _run(cli, "operators", "create", "x", "--role", "root", *db_opt, code=2)
    _run(cli, "operators", "revoke", "olga", *db_opt)
    await asyncio.sleep(2.1)  # revoked by another process: gateways see it within the 2 s TTL
    assert (await api.client.get("/admin/whoami", headers=headers)).status_code == 401
    with api.db.reader() as r:
        actions = [e.action for e in r.audit.list(target="operator:olga")]
    assert sorted(actions) == ["operator.create", "operator.revoke"]
