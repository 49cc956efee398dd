"""Fixtures of the recorder tests: the state stores on the suite's Redis and a migrated
database (SQLite, and PostgreSQL where the suite has one)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from control_plane.state import StateStores
from storage.db import Database


@pytest.fixture
async def stores(redis_url: str) -> AsyncIterator[StateStores]:
    s = StateStores.open(redis_url, "rec")
    await s.events.ensure_groups()
    yield s
    await s.aclose()


@pytest.fixture
def db(db_url: str) -> Iterator[Database]:
    database = Database(db_url)
    database.migrate()
    yield database
    database.dispose()  # its pooled connections would otherwise hold the schema db_url drops
