"""`arbiter admin tenants|keys|report` on a real database, and the functions `arbiter up` uses."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path

import pytest
import typer
from sqlalchemy import exc as sa_exc
from typer.testing import CliRunner

from control_plane.admin import tenancy
from control_plane.admin_cli import register
from control_plane.contracts.knobs import NodeWeights
from control_plane.state import StateStores
from storage.db import Database
from tests.control_plane.api.admin.conftest import AdminApi
from tests.control_plane.api.admin.test_reports import SPAN, START, make_rows


@pytest.fixture
def cli() -> typer.Typer:
    app = typer.Typer()
    register(app)
    return app


@pytest.fixture(autouse=True)
def running_system(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Redis the CLI tells of its changes: the suite's own, never a machine's 6379."""
    monkeypatch.setenv("ARBITER_REDIS_URL", redis_url)
    monkeypatch.setenv("ARBITER_CLUSTER", "default")


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


async def _knob_weights(api: AdminApi) -> dict[tuple[str, ...], float]:
    value = await api.stores.knobs.get("weights")
    return dict(value.table) if isinstance(value, NodeWeights) else {}


async def test_the_cli_tells_the_scheduler_of_a_weight_change(
    cli: typer.Typer, api: AdminApi
) -> None:
    """Regression: the CLI wrote SQL only, so a weight set earlier through the API stayed in
    the `weights` knob — applied by the scheduler at every takeover and shown by the live
    fairness view — after the CLI had changed it."""
    db_opt = ("--database-url", api.db.url)
    await asyncio.to_thread(_run, cli, "tenants", "create", "acme", "--no-key", *db_opt)
    put = await api.client.put("/admin/weights/acme", json={"weight": 4, "reason": "vip"})
    assert put.status_code == 200, put.text
    assert await _knob_weights(api) == {("acme",): 4.0}
    directory = await api.stores.knobs.get("directory")

    out = await asyncio.to_thread(
        _run, cli, "tenants", "update", "acme", "--weight", "1.5", *db_opt
    )
    assert "warning" not in out
    assert await _knob_weights(api) == {("acme",): 1.5}
    assert await api.stores.knobs.get("directory") != directory
    await asyncio.to_thread(_run, cli, "tenants", "update", "acme", "--tier", "2", *db_opt)
    assert await _knob_weights(api) == {("acme",): 1.5}
    await asyncio.to_thread(_run, cli, "tenants", "delete", "acme", "--yes", *db_opt)
    assert await _knob_weights(api) == {}


def test_a_cli_change_stands_when_redis_does_not_answer(
    cli: typer.Typer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ARBITER_REDIS_URL", f"redis://127.0.0.1:{_closed_port()}/0")
    url = f"sqlite:///{tmp_path / 'a.db'}"
    out = _run(cli, "tenants", "create", "acme", "--weight", "2", "--no-key", "--database-url", url)
    assert "warning: the running system was not told" in " ".join(out.split())
    db = Database(url)
    with db.reader() as r:
        assert r.tenants.get_tenant(name="acme").weight == 2.0  # type: ignore[union-attr]
    db.dispose()


def test_a_cli_weight_whose_re_read_fails_is_a_warning_not_a_traceback(
    cli: typer.Typer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI publishes the weight SQL holds, read again after its change committed; that
    read failing ended the command in a traceback after it had printed the change."""

    def gone(*_: object) -> None:
        raise sa_exc.OperationalError("SELECT …", {}, Exception("the database went away"))

    monkeypatch.setattr(tenancy, "_find", gone)  # below `weight_of`: its own handling runs
    url = f"sqlite:///{tmp_path / 'a.db'}"
    out = _run(cli, "tenants", "create", "acme", "--weight", "2", "--no-key", "--database-url", url)
    assert (
        "warning: the scheduler was not told the new weight (database re-read failed"
        in " ".join(out.split())
    )
    db = Database(url)
    with db.reader() as r:
        assert r.tenants.get_tenant(name="acme").weight == 2.0  # type: ignore[union-attr]
    db.dispose()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_report_checks_its_output_first_and_warns_of_an_unknown_tenant(
    cli: typer.Typer, tmp_path: Path
) -> None:
    """Regression: --output a directory was an IsADirectoryError traceback after the query,
    and a misspelt --tenant printed an empty report without a word."""
    url = f"sqlite:///{tmp_path / 'r.db'}"
    folder = CliRunner().invoke(cli, ["report", "--database-url", url, "-o", str(tmp_path)])
    assert folder.exit_code == 2 and "error: --output:" in folder.output, folder.output
    typo = CliRunner().invoke(
        cli, ["report", "--database-url", url, "--tenant", "acmee", "--format", "csv"]
    )
    assert typo.exit_code == 0
    assert "warning: --tenant: no tenant 'acmee'" in typo.stderr
    assert typo.stdout.startswith("node,tenant,app,agent")  # the CSV itself stays clean


async def test_the_cli_finds_the_redis_of_arbiter_up_by_its_database(
    cli: typer.Typer, redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`arbiter up` runs its Redis on a free port and says so only in `.arbiter/up.json`:
    without ARBITER_REDIS_URL the CLI tells that Redis when up.json names its database."""
    monkeypatch.delenv("ARBITER_REDIS_URL")
    monkeypatch.chdir(tmp_path)
    url = f"sqlite:///{tmp_path / 'up.db'}"
    state = tmp_path / ".arbiter"
    state.mkdir()
    up = {"redis_url": redis_url, "cluster": "up-cli", "database_url": url}
    (state / "up.json").write_text(json.dumps(up))
    args = ["tenants", "create", "acme", "--weight", "3", "--no-key", "--database-url", url]
    out = await asyncio.to_thread(_run, cli, *args)
    assert "warning" not in out
    stores = StateStores.open(redis_url, "up-cli")
    try:
        weights = await stores.knobs.get("weights")
    finally:
        await stores.aclose()
    assert isinstance(weights, NodeWeights) and dict(weights.table) == {("acme",): 3.0}


@pytest.mark.parametrize(
    "flags,line",
    [
        (["--tier", "5000"], "error: --tier: must be an integer from 0 to 1000"),
        (["--tier", "99999999999999999999"], "error: --tier: must be an integer from 0 to 1000"),
        (["--queue-cap", "99999999999"], "error: --queue-cap: must be an integer from 1 to"),
        (["--token-budget", "99999999999999999999"], "error: --token-budget: must be an integer"),
        (["--slo-ttft-ms", "1e12"], "error: --slo-ttft-ms: must be a number > 0 and ≤ 8.64e+07"),
        (["--rate-limit", "1e9"], "error: --rate-limit: must be a number > 0 and ≤ 1e+06"),
    ],
)
def test_a_value_past_the_api_s_bounds_is_one_line_naming_the_flag(
    cli: typer.Typer, db_url: str, flags: list[str], line: str
) -> None:
    """Before, a tier past SQL's INTEGER was an OverflowError traceback, and a tier of 5000 or
    an SLO of 1e12 ms was stored although the admin API refuses them."""
    result = CliRunner().invoke(
        cli, ["tenants", "create", "acme", *flags, "--database-url", db_url]
    )
    assert result.exit_code == 2, result.output
    (only,) = result.output.strip().splitlines()
    assert only.startswith(line) and "or null" not in only, only  # a flag cannot give null
    db = Database(db_url)
    with db.reader() as r:
        assert r.tenants.get_tenant(name="acme") is None
    db.dispose()
