"""Alembic environment for Arbiter's schema.

Programmatic use (`storage.migrate.migrate`) passes a live connection in
`config.attributes["connection"]`. From the command line, give the URL with
`alembic -c storage/migrations/alembic.ini -x url=sqlite:///./arbiter.db upgrade head`.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from storage.engine import create_engine_for, foreign_key_violations, sqlite_foreign_keys_off
from storage.models import Base

target_metadata = Base.metadata


def _configure_and_run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        compare_type=True,
        # SQLite cannot ALTER most things in place; batch mode rebuilds tables for it.
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    """Run against the handed-over connection, or a URL from `-x url=` / the .ini."""
    connection = context.config.attributes.get("connection")
    if connection is not None:
        _configure_and_run(connection)
        return
    url = context.get_x_argument(as_dictionary=True).get("url") or context.config.get_main_option(
        "sqlalchemy.url"
    )
    if not url:
        raise SystemExit("give the database URL: alembic ... -x url=sqlite:///./arbiter.db")
    engine = create_engine_for(url)
    try:
        with engine.connect() as conn, sqlite_foreign_keys_off(conn):
            conn.begin()  # one transaction: alembic then runs every migration inside it
            dangling = set(foreign_key_violations(conn))
            _configure_and_run(conn)
            new = [v for v in foreign_key_violations(conn) if v not in dangling]
            if new:
                raise SystemExit(f"the migration left rows referencing missing parents: {new}")
            conn.commit()
    finally:
        engine.dispose()


if context.is_offline_mode():
    raise SystemExit("offline (--sql) migrations are not supported; connect to a database")
run_migrations_online()
