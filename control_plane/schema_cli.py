"""`arbiter migrate`: bring the SQL schema to this build's migrations as a deployment step;
`arbiter prune-history`: delete old request rows and old minute rollups (`storage/retention.py`).

The recorder, `arbiter up` and `arbiter admin` migrate on start; gateways never do, so a new
gateway must not serve before its schema is there. Deployments run this command first (an init
container on Kubernetes, a one-shot service on Compose) and start the new version only after
it succeeded. `--check` changes nothing and says, by its exit status, whether a migration is
due (`DUE`), or whether a newer build migrated the database (`AHEAD`; 1 stays an error: an
unreachable database); `--to` moves to an older revision, which is how a roll-back to an older
build starts (run by the newer build, which ships the downgrade).

A schema a newer build migrated is left as it is, and migrating to this build's head succeeds
on it with a warning: migrations are additive, so this build runs on it, and an older pod
restarted in the middle of a rolling update must not fail its init step. Only a `--to` an
older revision is refused there (this build does not know the revisions it would undo).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Annotated

import typer

from control_plane.core.cli_errors import user_errors
from control_plane.settings import SettingsError, database_url_of
from storage.db import Database
from storage.errors import StorageError
from storage.migrate import (
    SchemaAhead,
    UnknownRevision,
    history,
    migrate,
    schema_status,
    shown_url,
)
from storage.retention import (
    MIN_AGE_S,
    MIN_MINUTE_AGE_S,
    prune_history,
    prune_minute_rollups,
)

Opt = typer.Option
DUE = 3
"""`--check`'s exit status when a migration to this build's head is due."""
AHEAD = 4
"""`--check`'s exit status when a newer build migrated the database (this build runs on it)."""
MAX_DAYS = 100_000
"""Longest `--older-than-days` and `--minute-rollups-older-than-days` (some 270 years): a cut
before year 1 is not a time."""


def migrate_command(
    database_url: Annotated[str | None, Opt(help="SQL URL (default ARBITER_DATABASE_URL).")] = None,
    to: Annotated[
        str, Opt(help="Target revision: head (this build's latest), an older one, or base.")
    ] = "head",
    check: Annotated[
        bool,
        Opt(
            help="Change nothing; exit 3 when a migration to this build's head is due, 4 when "
            "a newer build migrated the database."
        ),
    ] = False,
) -> None:
    """Migrate the SQL schema to this build (before starting a new version's gateways)."""
    with user_errors(errors=(SettingsError,)):
        url = database_url_of(database_url)
    shown = shown_url(url)
    try:
        if check:
            _check(url, shown)
            return
        before, after = migrate(url, revision=to)
    except SchemaAhead as exc:
        _ahead(exc, shown, check=check, to=to)
        return
    except UnknownRevision as exc:
        typer.echo(f"error: --to: {exc}", err=True)
        raise typer.Exit(2) from None
    except StorageError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    if before == after:
        typer.echo(f"{shown}: already at {_name(after)}; nothing to do")
    else:
        typer.echo(f"{shown}: migrated from {_name(before)} to {_name(after)}")


def _check(url: str, shown: str) -> None:
    status = schema_status(url)
    if not status.pending:
        typer.echo(f"{shown}: at {status.head}, this build's latest; up to date")
        return
    typer.echo(
        f"{shown}: at {_name(status.current)}, this build's latest is {status.head}; "
        f"{len(status.pending)} to apply: {', '.join(status.pending)}"
    )
    raise typer.Exit(DUE)


def _ahead(exc: SchemaAhead, shown: str, *, check: bool, to: str) -> None:
    if to not in ("head", history()[-1]) and not check:  # it would undo revisions it lacks
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1)
    line = f"{shown}: {exc}; this build runs on it as it is"
    typer.echo(line if check else f"warning: {line}", err=not check)
    if check:
        raise typer.Exit(AHEAD)


def _name(revision: str | None) -> str:
    return revision or "base (empty)"


def prune_command(
    older_than_days: Annotated[
        float | None,
        Opt(help="Delete the request rows that arrived more than this many days ago."),
    ] = None,
    minute_rollups_older_than_days: Annotated[
        float | None,
        Opt(
            help="Delete the per-minute rollups older than this many days (cut down to the "
            "hour; hour and day rollups stay, reports there widen to whole hours)."
        ),
    ] = None,
    database_url: Annotated[str | None, Opt(help="SQL URL (default ARBITER_DATABASE_URL).")] = None,
) -> None:
    """Delete old request rows and/or old minute rollups (the hour and day rollups, and so the
    reports' totals, are kept)."""
    with user_errors(errors=(SettingsError,)):
        url = database_url_of(database_url)
    if older_than_days is None and minute_rollups_older_than_days is None:
        typer.echo(
            "error: give --older-than-days, --minute-rollups-older-than-days or both", err=True
        )
        raise typer.Exit(2)
    _check_days("--older-than-days", older_than_days, MIN_AGE_S)
    _check_days(
        "--minute-rollups-older-than-days", minute_rollups_older_than_days, MIN_MINUTE_AGE_S
    )
    now = time.time()
    shown = shown_url(url)
    db = Database(url)
    try:
        _check_migrated(url)
        if older_than_days is not None:
            before = now - older_than_days * 86_400
            deleted = prune_history(db, before=before, now=now)
            typer.echo(f"{shown}: deleted {deleted} request rows that arrived before {_at(before)}")
        if minute_rollups_older_than_days is not None:
            before = now - minute_rollups_older_than_days * 86_400
            cut, deleted = prune_minute_rollups(db, before=before, now=now)
            typer.echo(f"{shown}: deleted {deleted} minute rollup rows before {_at(cut)}")
    except StorageError as exc:  # one line: a driver's message may go on with its SQL
        typer.echo(f"error: {str(exc).splitlines()[0]}", err=True)
        raise typer.Exit(1) from None
    finally:
        db.dispose()


def _check_days(flag: str, days: float | None, min_age_s: float) -> None:
    """Exit 2 with one line naming `flag` unless `days` is None or within its bounds."""
    least = min_age_s / 86_400
    if days is not None and not least <= days <= MAX_DAYS:  # NaN too
        typer.echo(f"error: {flag}: must be from {least:g} to {MAX_DAYS}", err=True)
        raise typer.Exit(2)


def _at(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds")


def _check_migrated(url: str) -> None:
    """Exit 1 with one line unless the schema is this build's (or a newer build's)."""
    try:
        status = schema_status(url)
    except SchemaAhead:
        return  # a newer build's: its requests table is this build's and more
    if status.pending:
        typer.echo(
            f"error: {shown_url(url)}: at {_name(status.current)}, this build's latest is "
            f"{status.head}: run `arbiter migrate` first",
            err=True,
        )
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add `migrate` and `prune-history` to `app` (the top level)."""
    app.command("migrate")(migrate_command)
    app.command("prune-history")(prune_command)
