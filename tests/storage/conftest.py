"""A migrated database per test, on SQLite and on PostgreSQL (through `db_url`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from storage.db import Database


@pytest.fixture
def db(db_url: str) -> Iterator[Database]:
    """A freshly migrated database (SQLite file or PostgreSQL schema)."""
    database = Database(db_url)
    database.migrate()
    yield database
    database.dispose()
