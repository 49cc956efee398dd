"""Engines: SQLite pragmas and locking behaviour, URL normalisation, nothing at import time."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from storage.db import Database
from storage.engine import create_engine_for, normalize_url


def test_sqlite_connections_get_wal_foreign_keys_and_busy_timeout(tmp_path: Path) -> None:
    engine = create_engine_for(f"sqlite:///{tmp_path / 'a.db'}")
    try:
        with engine.connect() as conn:
            pragmas = [conn.exec_driver_sql(f"PRAGMA {p}").scalar() for p in
                       ("journal_mode", "foreign_keys", "busy_timeout")]  # fmt: skip
            assert pragmas == ["wal", 1, 10_000]
            conn.exec_driver_sql("CREATE TABLE p (id INTEGER PRIMARY KEY)")
            conn.exec_driver_sql("CREATE TABLE c (p_id INTEGER REFERENCES p(id))")
            with pytest.raises(IntegrityError):
                conn.exec_driver_sql("INSERT INTO c VALUES (42)")
    finally:
        engine.dispose()


def test_urls_are_normalised_to_psycopg() -> None:
    assert normalize_url("postgresql://u@h/db") == "postgresql+psycopg://u@h/db"
    assert normalize_url("postgres://u@h/db") == "postgresql+psycopg://u@h/db"
    assert normalize_url("postgresql+psycopg://u@h/db") == "postgresql+psycopg://u@h/db"
    assert normalize_url("sqlite:///x.db") == "sqlite:///x.db"


def test_importing_storage_creates_no_engine_and_no_file(tmp_path: Path) -> None:
    code = (
        "import gc, storage, storage.db, storage.bench_reports, storage.migrate\n"
        "from sqlalchemy import Engine\n"
        "assert not [o for o in gc.get_objects() if isinstance(o, Engine)]\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=tmp_path, check=True, timeout=60)
    assert list(tmp_path.iterdir()) == []


def test_sqlite_writers_queue_and_readers_never_wait(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'arbiter.db'}")
    db.migrate()
    holding = threading.Event()

    def slow_writer() -> None:
        with db.repos() as r:
            r.tenants.create_tenant(name="first")
            holding.set()
            time.sleep(0.6)

    thread = threading.Thread(target=slow_writer)
    thread.start()
    holding.wait(5)
    began = time.monotonic()
    with db.reader() as r:  # reads the last committed snapshot, without waiting
        read_names = [t.name for t in r.tenants.list_tenants()]
    read_took = time.monotonic() - began
    with db.repos() as r:  # BEGIN IMMEDIATE waits for the write lock ...
        # ... so reading first, then writing, cannot hit SQLITE_BUSY on a stale snapshot
        seen_by_writer = [t.name for t in r.tenants.list_tenants()]
        r.tenants.create_tenant(name="second")
    waited = time.monotonic() - began
    thread.join()
    assert read_names == [] and read_took < 0.3
    assert seen_by_writer == ["first"]
    assert waited >= 0.3
    with db.reader() as r:
        assert [t.name for t in r.tenants.list_tenants()] == ["first", "second"]
        assert r.session.execute(text("SELECT count(*) FROM tenants")).scalar() == 2
    db.dispose()


def test_a_postgresql_server_that_never_answers_fails_the_connect(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A listener that takes the TCP connection and never answers (a hung server, a half-open
    fail-over address): the connect gives up by the engine's own timeout instead of hanging a
    recorder's write for good."""
    import storage.engine

    monkeypatch.setattr(storage.engine, "PG_CONNECT_TIMEOUT_S", 1, raising=False)
    silent = socket.create_server(("127.0.0.1", 0))
    port = silent.getsockname()[1]
    engine = create_engine_for(f"postgresql+psycopg://postgres@127.0.0.1:{port}/none")
    outcome: list[BaseException] = []

    def connect() -> None:
        try:
            engine.connect().close()
        except Exception as exc:
            outcome.append(exc)

    began = time.monotonic()
    attempt = threading.Thread(target=connect, daemon=True)
    attempt.start()
    attempt.join(timeout=8)
    hung = attempt.is_alive()
    silent.close()  # resets a connection still waiting, so a hung attempt ends too
    attempt.join(timeout=5)
    engine.dispose()
    assert not hung, "the connect to a silent server did not give up"
    assert outcome and time.monotonic() - began < 8


@pytest.mark.postgres
def test_postgresql_connections_carry_timeouts_the_url_can_override() -> None:
    from tests.conftest import PG_URL

    for url, connect_timeout in ((PG_URL, "10"), (f"{PG_URL}?connect_timeout=3", "3")):
        engine = create_engine_for(url)
        try:
            with engine.connect() as conn:
                params = conn.connection.dbapi_connection.info.get_parameters()  # type: ignore[union-attr]
        finally:
            engine.dispose()
        assert params["connect_timeout"] == connect_timeout
        assert params["tcp_user_timeout"] == "30000"
        assert (params["keepalives"], params["keepalives_idle"]) == ("1", "10")
