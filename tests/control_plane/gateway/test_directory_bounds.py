"""The SQL directory's caches against a real SQLite database: bounded whatever keys and names
requests carry, one SQL query per unknown key (then none while it is negatively cached), and
revocation still immediate."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from control_plane.gateway.directory import SqlDirectory
from storage.db import Database

CAP = 200


class Statements:
    """Counts SQL statements touching `table`."""

    def __init__(self, db: Database, table: str) -> None:
        self.n, self.table = 0, table
        sa.event.listen(db.engine, "before_cursor_execute", self._seen)

    def _seen(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if self.table in statement:
            self.n += 1


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = Database(f"sqlite:///{tmp_path / 'arbiter.db'}")
    database.migrate()
    with database.repos() as r:
        r.tenants.create_tenant(name="acme")
    yield database
    database.dispose()


def _new_key(db: Database) -> tuple[int, str]:
    with db.repos() as r:
        rec, key = r.keys.create(tenant="acme")
    return rec.id, key


async def test_unknown_keys_fill_the_negative_cache_to_its_cap_only(db: Database) -> None:
    directory = SqlDirectory(db, max_entries=CAP)
    queries = Statements(db, "api_keys")
    keys = [secrets.token_urlsafe(3072) for _ in range(3000)]
    for key in keys:
        assert await directory.tenant_for_key(key) is None
    assert queries.n == 3000
    assert directory.cache_sizes()["bad_keys"] == CAP
    assert max(directory.cache_sizes().values()) == CAP

    for _ in range(100):  # a client retrying a bad key
        assert await directory.tenant_for_key(keys[-1]) is None
    assert await directory.tenant_for_key("too-short") is None
    assert queries.n == 3000


async def test_concurrent_lookups_of_one_key_share_one_query(db: Database) -> None:
    _, key = _new_key(db)
    directory = SqlDirectory(db)
    queries = Statements(db, "api_keys")
    bad = "arb-" + "z" * 40
    found = await asyncio.gather(*(directory.tenant_for_key(k) for k in [key, bad] * 50))
    assert found == ["acme", None] * 50
    assert queries.n == 2
    assert directory.vouched(key) and not directory.vouched(bad)


async def test_valid_keys_are_cached_by_digest_and_bounded(db: Database) -> None:
    keys = [_new_key(db)[1] for _ in range(30)]
    directory = SqlDirectory(db, max_entries=10)
    for key in keys:
        assert await directory.tenant_for_key(key) == "acme"
    sizes = directory.cache_sizes()
    assert sizes["keys"] == 10 and sizes["trusted"] == 10
    assert not any(isinstance(k, str) for k in directory._keys._data)  # digests, never keys


async def test_revocation_is_immediate_even_for_a_vouched_key(db: Database) -> None:
    key_id, key = _new_key(db)
    directory = SqlDirectory(db, ttl_s=60)
    assert await directory.tenant_for_key(key) == "acme"
    with db.repos() as r:
        r.keys.revoke(key_id=key_id)
    directory.invalidate()  # what the admin API does after a revocation
    assert directory.vouched(key)  # trust only spares the limiter...
    assert await directory.tenant_for_key(key) is None  # ...access is decided by SQL
    assert not directory.vouched(key)


async def test_header_named_apps_and_agents_are_bounded(db: Database) -> None:
    directory = SqlDirectory(db, max_entries=CAP)
    tenant = await directory.tenant("acme")
    for i in range(CAP * 3):
        node = await directory.resolve(tenant, f"app-{i}", "default")
        assert node.app == f"app-{i}"
    sizes = directory.cache_sizes()
    assert sizes["nodes"] == CAP and sizes["records"] == CAP
