"""A database as a newer Arbiter build would leave it: migrated, its revision one this build
does not ship."""

from __future__ import annotations

from sqlalchemy import text

from storage.engine import create_engine_for
from storage.migrate import migrate


def migrated_by_a_newer_build(url: str, revision: str = "0099") -> None:
    """Migrate `url`, then stamp it with `revision` (its schema is this build's own)."""
    migrate(url)
    engine = create_engine_for(url)
    try:
        with engine.begin() as conn:
            conn.execute(text("UPDATE alembic_version SET version_num = :r"), {"r": revision})
    finally:
        engine.dispose()
