"""Programmatic Alembic upgrade using the migrations shipped inside the package.

Works from an installed package and from any working directory: the script location is found
next to this module, and the connection is handed to `env.py` directly (no URL in an .ini, so
URLs containing '%' need no escaping). Concurrent callers are serialised — a PostgreSQL advisory
lock, or SQLite's write lock taken up front — so two processes starting together both succeed.
The history is linear (one head), so "older" and "newer" between two revisions are defined: a
target below the database's revision downgrades, and a database at a revision this build does
not ship (a newer Arbiter migrated it) is refused rather than guessed at.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, make_url, text
from sqlalchemy import exc as sa_exc

from storage.engine import (
    create_engine_for,
    foreign_key_violations,
    sqlite_foreign_keys_off,
    writer_engine,
)
from storage.errors import StorageError, StorageUnavailable

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
_PG_LOCK_ID = 0x417262  # "Arb": one advisory lock id for Arbiter's migrations


def alembic_config(connection: Connection | None = None) -> Config:
    """An Alembic config pointing at the packaged migrations (and at `connection` if given)."""
    config = Config(str(MIGRATIONS_DIR / "alembic.ini"))
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


class SchemaAhead(StorageError):
    """The database is at a revision this build does not ship: a newer Arbiter migrated it.
    Only that newer build can move it back (`arbiter migrate --to <this build's head>`)."""


class UnknownRevision(StorageError, ValueError):
    """A target revision that is not among this build's migrations."""


@dataclass(frozen=True, slots=True)
class SchemaStatus:
    """Where a database's schema stands against this build's migrations: `current` (None: an
    empty database), this build's `head`, and the revisions an upgrade would apply, oldest
    first (empty: up to date)."""

    current: str | None
    head: str
    pending: tuple[str, ...]


def history() -> list[str]:
    """This build's revisions, oldest first (a linear history: one head)."""
    script = ScriptDirectory.from_config(alembic_config())
    script.get_current_head()  # raises when a branch left two heads
    return [r.revision for r in reversed(list(script.walk_revisions()))]


def migrate(url: str, *, revision: str = "head") -> tuple[str | None, str | None]:
    """Move the database at `url` to `revision` (default: this build's latest; an older one
    downgrades, "base" empties it) → (revision before, revision after).

    Raises `SchemaAhead` when the database is at a revision this build does not ship,
    `UnknownRevision` for a target it does not ship, `StorageUnavailable` when the database
    cannot be reached (nothing is changed in any of these cases)."""
    order = history()
    target = _target(order, revision)
    engine = create_engine_for(url)
    try:
        with _reached(url):
            conn = writer_engine(engine).connect()
        with conn, sqlite_foreign_keys_off(conn):
            _lock(conn)
            before = _known(order, MigrationContext.configure(conn).get_current_revision())
            dangling = set(foreign_key_violations(conn))
            if _position(order, target) >= _position(order, before):
                command.upgrade(alembic_config(conn), target or "base")
            else:
                command.downgrade(alembic_config(conn), target or "base")
            _refuse_new_dangling_references(conn, dangling)
            conn.commit()
            return before, target
    finally:
        engine.dispose()


def schema_status(url: str) -> SchemaStatus:
    """Where the database at `url` stands (read only). Raises as `migrate`."""
    order = history()
    current = current_revision(url)
    _known(order, current)
    return SchemaStatus(current, order[-1], tuple(order[_position(order, current) + 1 :]))


def current_revision(url: str) -> str | None:
    """The revision the database at `url` is at (None before the first migration)."""
    engine = create_engine_for(url)
    try:
        with _reached(url):
            conn = engine.connect()
        with conn:
            return MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()


def _target(order: list[str], revision: str) -> str | None:
    if revision == "head":
        return order[-1]
    if revision == "base":
        return None
    matches = [r for r in order if r.startswith(revision)]
    if len(matches) == 1:
        return matches[0]
    what = "names several of" if matches else "is not one of"
    raise UnknownRevision(f"revision {revision!r} {what} this build's: {', '.join(order)}, or base")


def _known(order: list[str], current: str | None) -> str | None:
    if current is not None and current not in order:
        raise SchemaAhead(
            f"the database is at revision {current!r}, which this build does not ship (its "
            f"latest is {order[-1]!r}): a newer Arbiter migrated it; to bring it back to this "
            f"build's schema, run that version's `arbiter migrate --to {order[-1]}`"
        )
    return current


def _position(order: list[str], revision: str | None) -> int:
    return -1 if revision is None else order.index(revision)


def shown_url(url: str) -> str:
    """`url` as it may be printed: its password replaced by `***`."""
    return make_url(url).render_as_string(hide_password=True)


@contextmanager
def _reached(url: str) -> Iterator[None]:
    """A connection refused as `StorageUnavailable`, the URL without its password (only around
    connecting: SQLite raises a migration's own errors as `OperationalError` too)."""
    try:
        yield
    except (sa_exc.OperationalError, sa_exc.InterfaceError) as exc:
        where = shown_url(url)
        reason = str(exc.orig or exc).strip().splitlines()[0]
        raise StorageUnavailable(f"cannot reach the database at {where}: {reason}") from exc


def _lock(conn: Connection) -> None:
    """Serialise migrations; the lock lasts until the migration transaction ends."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:id)"), {"id": _PG_LOCK_ID})
    else:
        conn.begin()  # SQLite: BEGIN IMMEDIATE (writer engine) takes the write lock now


def _refuse_new_dangling_references(conn: Connection, before: set[tuple[Any, ...]]) -> None:
    """A migration run with SQLite's foreign keys off must not leave a reference dangling that
    was whole before it (rows dangling already are the database's, not the migration's)."""
    new = [v for v in foreign_key_violations(conn) if v not in before]
    if new:
        raise StorageError(f"the migration left rows referencing missing parents: {new}")
