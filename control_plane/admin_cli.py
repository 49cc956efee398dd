"""`arbiter admin tenants|keys|operators|report …`, working directly on the database.

They call the same audited operations as the admin API (`control_plane.admin.tenancy`) and
the same report function as `GET /admin/reports`, so numbers and audit rows match. After a
change they tell the running system through Redis as the API does (`admin/cli_announce.py`):
gateways drop their caches, and a weight change reaches the scheduler at once.
"""

from __future__ import annotations

import getpass
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, cast

import typer
from rich.console import Console
from rich.table import Table

from control_plane.admin import operators, tenancy
from control_plane.admin.cli_announce import announce
from control_plane.admin.records import as_json
from control_plane.admin.report_render import to_csv, to_html
from control_plane.admin.reports import (
    ReportQuery,
    Source,
    fairness_report,
    parse_time,
)
from control_plane.core.cli_errors import in_range
from control_plane.settings import SettingsError, database_url_of
from storage.db import Database
from storage.errors import InvalidValueError, StorageError
from storage.records import Level
from storage.repos.fields import MAX_WEIGHT, MIN_WEIGHT, TENANT_FIELDS

DbUrl = Annotated[
    str | None,
    typer.Option("--database-url", help="SQLAlchemy URL; default $ARBITER_DATABASE_URL."),
]
ReasonOpt = Annotated[str, typer.Option("--reason", help="Why (kept in the audit log).")]
Weight = Annotated[
    float | None,
    typer.Option(
        "--weight",
        callback=in_range(MIN_WEIGHT, MAX_WEIGHT),
        help=f"Fair-share weight ({MIN_WEIGHT:g} … {MAX_WEIGHT:g}).",
    ),
]
Tier = Annotated[int | None, typer.Option("--tier", min=0, help="Priority tier (0 = most urgent).")]
SloTtft = Annotated[float | None, typer.Option("--slo-ttft-ms", help="Default TTFT target.")]
SloTpot = Annotated[float | None, typer.Option("--slo-tpot-ms", help="Default TPOT target.")]
SloE2e = Annotated[float | None, typer.Option("--slo-e2e-ms", help="Default end-to-end target.")]
QueueCap = Annotated[int | None, typer.Option("--queue-cap", min=1, help="Queued requests cap.")]
Rate = Annotated[float | None, typer.Option("--rate-limit", help="Requests per second.")]
Budget = Annotated[
    int | None,
    typer.Option(
        "--token-budget",
        min=0,
        help="Most tokens (prompt + completion) per UTC day, across every gateway; once used, "
        "new requests get 429 token_budget_exceeded until 00:00 UTC (requests already "
        "accepted finish, so usage may overshoot by what was in flight). Unset = unlimited.",
    ),
]
AsJson = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
FromOpt = Annotated[
    str | None, typer.Option("--from", help="Epoch s or ISO 8601; default 24 h before --to.")
]
ToOpt = Annotated[str | None, typer.Option("--to", help="Epoch s or ISO 8601; default now.")]
LevelOpt = Annotated[str, typer.Option("--level", help="tenant | app | agent")]
FormatOpt = Annotated[str, typer.Option("--format", help="csv | json | html")]
TenantOpt = Annotated[str | None, typer.Option("--tenant", help="Only this tenant's nodes.")]
StepOpt = Annotated[int | None, typer.Option("--step", help="Series step: 60, 3600 or 86400 s.")]
SourceOpt = Annotated[
    str,
    typer.Option(
        "--source", help="rollups (fast) | requests (exact row scan; at most 500,000 rows)"
    ),
]
OutputOpt = Annotated[
    Path | None, typer.Option("--output", "-o", help="Write here instead of stdout.")
]

console = Console()
tenants_app = typer.Typer(help="Create, list, update and delete tenants.", no_args_is_help=True)
keys_app = typer.Typer(help="Issue, list and revoke tenants' API keys.", no_args_is_help=True)


def _actor() -> str:
    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):
        return "cli"


def _as_flag(message: str) -> str:
    """Storage's message about a field (`priority_tier must be …`) naming the flag instead."""
    field, _, rest = message.partition(" ")
    if field not in TENANT_FIELDS or not rest.startswith("must "):
        return message
    flag = {"priority_tier": "tier", "rate_limit_rps": "rate-limit"}.get(field, field)
    return f"--{flag.replace('_', '-')}: {rest.replace(' or null', '')}"  # no null from here


@contextmanager
def _database(url: str | None) -> Iterator[Database]:
    try:
        db = Database(database_url_of(url))
    except SettingsError as exc:
        for line in exc.lines:
            console.print(f"[red]error:[/red] {line}", soft_wrap=True)
        raise typer.Exit(2) from None
    try:
        db.migrate()
        yield db
    except InvalidValueError as exc:  # what the operator typed, not the database's state
        console.print(f"[red]error:[/red] {_as_flag(str(exc))}", soft_wrap=True)
        raise typer.Exit(2) from None
    except StorageError as exc:
        console.print(f"[red]error:[/red] {exc}", soft_wrap=True)
        raise typer.Exit(1) from exc
    finally:
        db.dispose()


def _told(warning: str | None) -> None:
    if warning is not None:
        console.print(f"[yellow]warning:[/yellow] {warning}", soft_wrap=True)


def _fields(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def _print_rows(rows: list[dict[str, Any]], columns: list[str], as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    table = Table(*columns)
    for row in rows:
        table.add_row(*("" if row.get(c) is None else str(row.get(c)) for c in columns))
    console.print(table)


# -- tenants -------------------------------------------------------------------------------
@tenants_app.command("create")
def tenants_create(
    name: str,
    weight: Weight = None,
    tier: Tier = None,
    slo_ttft_ms: SloTtft = None,
    slo_tpot_ms: SloTpot = None,
    slo_e2e_ms: SloE2e = None,
    queue_cap: QueueCap = None,
    rate_limit: Rate = None,
    token_budget: Budget = None,
    with_key: Annotated[bool, typer.Option("--with-key/--no-key", help="Also issue a key.")] = True,
    reason: ReasonOpt = "created with the arbiter CLI",
    database_url: DbUrl = None,
) -> None:
    """Create a tenant (and, by default, an API key shown once)."""
    fields = _fields(
        weight=weight, priority_tier=tier, slo_ttft_ms=slo_ttft_ms, slo_tpot_ms=slo_tpot_ms,
        slo_e2e_ms=slo_e2e_ms, queue_cap=queue_cap, rate_limit_rps=rate_limit,
        token_budget=token_budget,
    )  # fmt: skip
    with _database(database_url) as db:
        record = tenancy.create_node(db, (name,), fields, actor=_actor(), reason=reason)
        console.print(f"created tenant [bold]{record.name}[/bold] (weight {record.weight:g})")
        if with_key:
            _, key = tenancy.create_key(
                db, tenant=name, label="default", actor=_actor(), reason=reason
            )
            console.print("API key (shown once):")
            typer.echo(key)
    _told(announce((name,), database_url=db.url, weight_changed="weight" in fields))


@tenants_app.command("list")
def tenants_list(as_json: AsJson = False, database_url: DbUrl = None) -> None:
    """Every tenant with its weight, tier, SLO defaults and limits."""
    with _database(database_url) as db:
        rows = as_json_rows(tenancy.list_children(db, ()))
    columns = ["name", "weight", "priority_tier", "slo_ttft_ms", "slo_tpot_ms", "slo_e2e_ms",
               "queue_cap", "rate_limit_rps", "token_budget"]  # fmt: skip
    _print_rows(rows, columns, as_json)


def as_json_rows(records: list[Any]) -> list[dict[str, Any]]:
    return [cast(dict[str, Any], as_json(r)) for r in records]


@tenants_app.command("update")
def tenants_update(
    name: str,
    weight: Weight = None,
    tier: Tier = None,
    slo_ttft_ms: SloTtft = None,
    slo_tpot_ms: SloTpot = None,
    slo_e2e_ms: SloE2e = None,
    queue_cap: QueueCap = None,
    rate_limit: Rate = None,
    token_budget: Budget = None,
    reason: ReasonOpt = "updated with the arbiter CLI",
    database_url: DbUrl = None,
) -> None:
    """Change a tenant's weight, tier, SLO defaults or limits (only the options given)."""
    changes = _fields(
        weight=weight, priority_tier=tier, slo_ttft_ms=slo_ttft_ms, slo_tpot_ms=slo_tpot_ms,
        slo_e2e_ms=slo_e2e_ms, queue_cap=queue_cap, rate_limit_rps=rate_limit,
        token_budget=token_budget,
    )  # fmt: skip
    if not changes:
        console.print("[red]error:[/red] nothing to change (give at least one option)")
        raise typer.Exit(2)
    with _database(database_url) as db:
        record = tenancy.update_node(db, (name,), changes, actor=_actor(), reason=reason)
    console.print(f"updated tenant [bold]{record.name}[/bold]: {changes}")
    _told(announce((name,), database_url=db.url, weight_changed="weight" in changes))


@tenants_app.command("delete")
def tenants_delete(
    name: str,
    reason: ReasonOpt = "deleted with the arbiter CLI",
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    database_url: DbUrl = None,
) -> None:
    """Delete a tenant with its applications, agents and keys (request history is kept)."""
    if not yes:
        typer.confirm(f"Delete tenant {name!r} with its apps, agents and keys?", abort=True)
    with _database(database_url) as db:
        tenancy.delete_node(db, (name,), actor=_actor(), reason=reason)
    console.print(f"deleted tenant [bold]{name}[/bold]")
    _told(announce((name,), database_url=db.url, weight_changed=True))


# -- keys ----------------------------------------------------------------------------------
@keys_app.command("create")
def keys_create(
    tenant: str,
    label: Annotated[str | None, typer.Option("--label", help="What the key is for.")] = None,
    reason: ReasonOpt = "issued with the arbiter CLI",
    database_url: DbUrl = None,
) -> None:
    """Issue a key for TENANT; the key is printed once and never stored."""
    with _database(database_url) as db:
        record, key = tenancy.create_key(
            db, tenant=tenant, label=label, actor=_actor(), reason=reason
        )
    console.print(f"key {record.id} for [bold]{tenant}[/bold] (shown once):")
    typer.echo(key)


@keys_app.command("list")
def keys_list(
    tenant: Annotated[str | None, typer.Option("--tenant", help="Only this tenant's.")] = None,
    as_json: AsJson = False,
    database_url: DbUrl = None,
) -> None:
    """Keys with their display prefix and state (never the key itself)."""
    with _database(database_url) as db:
        rows = as_json_rows(tenancy.list_keys(db, tenant=tenant))
    _print_rows(rows, ["id", "tenant", "prefix", "label", "created_at", "revoked_at"], as_json)


@keys_app.command("revoke")
def keys_revoke(
    key_id: int,
    reason: ReasonOpt = "revoked with the arbiter CLI",
    database_url: DbUrl = None,
) -> None:
    """Revoke key KEY_ID (see `arbiter admin keys list`)."""
    with _database(database_url) as db:
        record = tenancy.revoke_key(db, key_id=key_id, actor=_actor(), reason=reason)
    console.print(f"revoked key {record.id} of [bold]{record.tenant}[/bold]")
    _told(announce((record.tenant,), database_url=db.url))


# -- operators -----------------------------------------------------------------------------
operators_app = typer.Typer(
    help="Create, list and revoke operator accounts (admin-API tokens with a role).",
    no_args_is_help=True,
)
RoleOpt = Annotated[
    str,
    typer.Option(
        "--role",
        help="viewer (read only) | operator (also weights, knobs, policy, drain) | admin (all)",
    ),
]


@operators_app.command("create")
def operators_create(
    name: str,
    role: RoleOpt = "viewer",
    reason: ReasonOpt = "created with the arbiter CLI",
    database_url: DbUrl = None,
) -> None:
    """Create operator NAME; its token is printed once and never stored."""
    _check(role, ("viewer", "operator", "admin"), "--role")
    with _database(database_url) as db:
        record, token = operators.create_operator(
            db, name=name, role=role, actor=_actor(), reason=reason
        )
    console.print(f"operator [bold]{record.name}[/bold] ({record.role}), token shown once:")
    typer.echo(token)


@operators_app.command("list")
def operators_list(as_json: AsJson = False, database_url: DbUrl = None) -> None:
    """Operators with their role, display prefix and state (never a token)."""
    with _database(database_url) as db:
        rows = as_json_rows(operators.list_operators(db))
    _print_rows(rows, ["name", "role", "prefix", "created_at", "revoked_at"], as_json)


@operators_app.command("revoke")
def operators_revoke(
    name: str,
    reason: ReasonOpt = "revoked with the arbiter CLI",
    database_url: DbUrl = None,
) -> None:
    """Revoke operator NAME's token (the name stays taken, so audit actors stay unambiguous)."""
    with _database(database_url) as db:
        record = operators.revoke_operator(db, name=name, actor=_actor(), reason=reason)
    console.print(f"revoked operator [bold]{record.name}[/bold]")


# -- report --------------------------------------------------------------------------------
def report(
    from_: FromOpt = None,
    to: ToOpt = None,
    level: LevelOpt = "tenant",
    fmt: FormatOpt = "json",
    tenant: TenantOpt = None,
    step: StepOpt = None,
    source: SourceOpt = "rollups",
    output: OutputOpt = None,
    database_url: DbUrl = None,
) -> None:
    """Historical fairness per node — the same numbers as the console's Reports page."""
    _check(level, ("tenant", "app", "agent"), "--level")
    _check(fmt, ("csv", "json", "html"), "--format")
    _check(source, ("rollups", "requests"), "--source")
    if output is not None and (output.is_dir() or not output.parent.is_dir()):
        typer.echo(f"error: --output: {output} cannot be written as a file", err=True)
        raise typer.Exit(2)
    try:
        end = parse_time(to) if to else time.time()
        start = parse_time(from_) if from_ else end - 86400
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--from/--to") from exc
    query = ReportQuery(start, end, cast(Level, level), tenant=tenant, step=step,
                        source=cast(Source, source))  # fmt: skip
    with _database(database_url) as db:
        data = fairness_report(db, query)
        if tenant is not None and not data["nodes"] and not _tenant_known(db, tenant):
            typer.echo(f"warning: --tenant: no tenant {tenant!r}, and no requests of one by "
                       "that name in the range", err=True)  # fmt: skip
    text = {"csv": to_csv, "html": to_html}.get(fmt, _json_text)(data)
    if output is None:
        typer.echo(text, nl=False)
    else:
        output.write_text(text, encoding="utf-8")
        console.print(f"wrote {output} ({len(data['nodes'])} nodes)")


def _tenant_known(db: Database, name: str) -> bool:
    try:
        tenancy.get_node(db, (name,))
    except StorageError:
        return False
    return True


def _json_text(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2) + "\n"


def _check(value: str, allowed: tuple[str, ...], option: str) -> None:
    if value not in allowed:
        raise typer.BadParameter(f"{option} must be one of {', '.join(allowed)}, got {value!r}")


def register(group: typer.Typer, aliases: typer.Typer | None = None) -> None:
    """Add `tenants`, `keys` and `report` to `group` (`arbiter admin`), and to `aliases`
    (the top level, hidden) under the same names."""
    for target, hidden in ((group, False), (aliases, True)):
        if target is None:
            continue
        target.add_typer(tenants_app, name="tenants", hidden=hidden)
        target.add_typer(keys_app, name="keys", hidden=hidden)
        target.command("report", hidden=hidden)(report)
    group.add_typer(operators_app, name="operators")
