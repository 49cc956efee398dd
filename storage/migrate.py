"""Programmatic Alembic upgrade using the migrations shipped inside the package.

Works from an installed package and from any working directory: the script location is found
next to this module, and the connection is handed to `env.py` directly (no URL in an .ini, so
URLs containing '%' need no escaping). Concurrent callers are serialised — a PostgreSQL advisory
lock, or SQLite's write lock taken up front — so two processes starting together both succeed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, text

from storage.engine import (
    create_engine_for,
    foreign_key_violations,
    sqlite_foreign_keys_off,
    writer_engine,
)
from storage.errors import StorageError

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
_PG_LOCK_ID = 0x417262  # "Arb": one advisory lock id for Arbiter's migrations


def alembic_config(connection: Connection | None = None) -> Config:
    """An Alembic config pointing at the packaged migrations (and at `connection` if given)."""
    config = Config(str(MIGRATIONS_DIR / "alembic.ini"))
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def migrate(url: str, *, revision: str = "head") -> None:
    """Upgrade the database at `url` to `revision` (default: the latest)."""
    engine = create_engine_for(url)
    try:
        with writer_engine(engine).connect() as conn, sqlite_foreign_keys_off(conn):
            _lock(conn)
            dangling = set(foreign_key_violations(conn))
            command.upgrade(alembic_config(conn), revision)
            _refuse_new_dangling_references(conn, dangling)
            conn.commit()
    finally:
        engine.dispose()


def current_revision(url: str) -> str | None:
    """The revision the database at `url` is at (None before the first migration)."""
    from alembic.runtime.migration import MigrationContext

    engine = create_engine_for(url)
    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()


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
