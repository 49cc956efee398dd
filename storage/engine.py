"""Engine and session factories. Nothing is created at import time.

SQLite: WAL, foreign keys and a busy timeout on every connection, and transactions begun by
SQLAlchemy itself (pysqlite's own implicit BEGIN is switched off: it breaks SAVEPOINT and
starts transactions late). A transaction begins DEFERRED unless the engine carries the
execution option `sqlite_begin="IMMEDIATE"` — used for every transaction that may write, so
the write lock is taken at BEGIN (waiting up to the busy timeout) instead of failing with
SQLITE_BUSY when a read snapshot must be upgraded after another writer committed.
PostgreSQL is used through psycopg 3; the option is ignored there. Its connections give up
on a server that does not answer: a connect waits at most `PG_CONNECT_TIMEOUT_S`, and TCP
keepalives plus a user timeout end a connection whose peer vanished (a half-open socket after a
fail-over or a network cut) in about half a minute instead of the OS's two hours, so a
recorder's write fails, and is retried, rather than hanging. The URL's own values win.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Iterator
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.orm import Session, sessionmaker

from storage import json_codec

SQLITE_BUSY_TIMEOUT_MS = 10_000
PG_CONNECT_TIMEOUT_S = 10
PG_KEEPALIVES = {"keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 5}
PG_KEEPALIVES_COUNT = 3
PG_TCP_USER_TIMEOUT_MS = 30_000


def normalize_url(url: str) -> str:
    """`postgres://` and `postgresql://` mean psycopg 3 (the only PostgreSQL driver we ship)."""
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def url_problem(url: str) -> str | None:
    """Why SQLAlchemy cannot use `url` (None when it can): checked where settings are read,
    so a malformed URL is one line naming the setting, not a traceback at first use."""
    try:
        make_url(normalize_url(url))
    except (ArgumentError, ValueError) as exc:
        return str(exc)
    return None


def create_engine_for(url: str, *, echo: bool = False) -> Engine:
    """An engine for `url` (SQLite file or memory, or PostgreSQL), configured for Arbiter."""
    url = normalize_url(url)
    backend = make_url(url).get_backend_name()
    options: dict[str, Any] = {
        "echo": echo,
        "json_serializer": json_codec.dumps,
        "json_deserializer": json_codec.loads,
    }
    if backend == "postgresql":
        options["pool_pre_ping"] = True
        options["connect_args"] = _pg_timeouts(set(make_url(url).query))
    engine = create_engine(url, **options)
    if backend == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
        event.listen(engine, "begin", _sqlite_begin)
    return engine


def _pg_timeouts(given: set[str]) -> dict[str, Any]:
    """libpq's connection timeouts, except those the URL sets itself."""
    defaults: dict[str, Any] = {
        "connect_timeout": PG_CONNECT_TIMEOUT_S,
        **PG_KEEPALIVES,
        "keepalives_count": PG_KEEPALIVES_COUNT,
        "tcp_user_timeout": PG_TCP_USER_TIMEOUT_MS,
    }
    return {name: value for name, value in defaults.items() if name not in given}


def writer_engine(engine: Engine) -> Engine:
    """The same engine (and pool) whose transactions take SQLite's write lock at BEGIN."""
    return engine.execution_options(sqlite_begin="IMMEDIATE")


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    dbapi_connection.isolation_level = None  # SQLAlchemy emits BEGIN itself (_sqlite_begin)
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        _wal(cursor)
        cursor.execute("PRAGMA foreign_keys=ON")
        # Durable across process crashes under WAL; only an OS crash can lose the last commit.
        cursor.execute("PRAGMA synchronous=NORMAL")
    finally:
        cursor.close()


def _wal(cursor: Any) -> None:
    """Put the database in WAL mode (it stays so). Switching a new database needs its
    exclusive lock, and SQLite refuses at once — without waiting for the busy timeout — while
    another connection holds a transaction (two processes migrating a new file together):
    then wait and look again, since that connection has usually switched it already."""
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            if str(cursor.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
                cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def _sqlite_begin(conn: Connection) -> None:
    mode = conn.get_execution_options().get("sqlite_begin", "DEFERRED")
    conn.exec_driver_sql(f"BEGIN {mode}")


def session_factory(engine: Engine, *, write: bool = True) -> sessionmaker[Session]:
    """Sessions whose objects stay readable after commit (repositories return records);
    `write=False` gives reading sessions that never wait for SQLite's write lock and read one
    snapshot on either database (`reader_engine`)."""
    bind = writer_engine(engine) if write else reader_engine(engine)
    return sessionmaker(bind=bind, expire_on_commit=False)


def reader_engine(engine: Engine) -> Engine:
    """The same engine (and pool) whose transactions read one snapshot: SQLite's deferred
    transactions do under WAL; PostgreSQL's default READ COMMITTED gives each statement its
    own, so a report's queries (counters, then percentiles, then series) could disagree and a
    node committed in between was missing from one of them. REPEATABLE READ fixes one
    snapshot per transaction; read-only statements there never fail to serialise."""
    if engine.dialect.name != "postgresql":
        return engine
    return engine.execution_options(isolation_level="REPEATABLE READ")


@contextlib.contextmanager
def sqlite_foreign_keys_off(conn: Connection) -> Iterator[None]:
    """On SQLite, foreign keys off for `conn` while inside (a no-op on other databases).

    For migrations: SQLite changes a constraint by rebuilding the table, and dropping the old
    table with foreign keys on runs its ON DELETE CASCADE actions, emptying the tables that
    reference it. Call before the connection begins a transaction (SQLite ignores the pragma
    inside one) and check `PRAGMA foreign_key_check` before committing.
    """
    if conn.dialect.name != "sqlite":
        yield
        return
    raw = conn.connection.dbapi_connection
    assert raw is not None
    if conn.in_transaction():
        raise RuntimeError("foreign keys can only be switched outside a transaction")
    raw.cursor().execute("PRAGMA foreign_keys=OFF")
    try:
        yield
    finally:
        if conn.in_transaction():
            conn.rollback()
        raw.cursor().execute("PRAGMA foreign_keys=ON")


def foreign_key_violations(conn: Connection) -> list[tuple[Any, ...]]:
    """Rows that reference a missing parent (SQLite's `foreign_key_check`; [] elsewhere)."""
    if conn.dialect.name != "sqlite":
        return []
    return [tuple(row) for row in conn.exec_driver_sql("PRAGMA foreign_key_check")]
