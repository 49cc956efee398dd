"""Session-wide real parts: a private redis-server and database URLs (SQLite and PostgreSQL)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.redis_server import RedisServer

PG_URL = os.environ.get("ARBITER_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """One private redis-server for the whole session, on a free port."""
    server = RedisServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """A clean Redis for each test."""
    redis_server.flush()
    return redis_server.url


def _pg_available() -> bool:
    import sqlalchemy as sa

    try:
        engine = sa.create_engine(PG_URL)
        with engine.connect() as conn:
            conn.execute(sa.text("select 1"))
        engine.dispose()
        return True
    except Exception:
        return False


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Each storage test runs against SQLite (a fresh file) and PostgreSQL (a fresh schema)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'arbiter.db'}"
        return
    if not _pg_available():
        if os.environ.get("CI"):
            pytest.fail(f"PostgreSQL is not answering at {PG_URL}")
        pytest.skip(f"PostgreSQL is not answering at {PG_URL}")
    import sqlalchemy as sa

    schema = f"t_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(PG_URL)
    with admin.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    yield f"{PG_URL}?options=-csearch_path%3D{schema}"
    with admin.begin() as conn:
        # a connection a test left open would make DROP wait for ever: fail in 30 s instead
        conn.execute(sa.text("SET LOCAL lock_timeout = '30s'"))
        conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
    admin.dispose()
