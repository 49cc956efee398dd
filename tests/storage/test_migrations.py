"""Alembic: the migrated schema equals the models, upgrades are idempotent and safe to run
concurrently, and the migrations ship inside the package (any working directory)."""

from __future__ import annotations

import fnmatch
import sqlite3
import subprocess
import sys
import threading
import tomllib
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text
from sqlalchemy.exc import IntegrityError

from storage.db import Database
from storage.engine import create_engine_for
from storage.errors import StorageUnavailable
from storage.migrate import (
    MIGRATIONS_DIR,
    SchemaAhead,
    SchemaStatus,
    UnknownRevision,
    alembic_config,
    current_revision,
    history,
    migrate,
    schema_status,
)
from storage.models import Base
from tests.support.schema import migrated_by_a_newer_build

REPO = Path(__file__).resolve().parents[2]
HEAD = ScriptDirectory.from_config(alembic_config()).get_current_head()


def _schema_diff(url: str) -> list[object]:
    engine = create_engine_for(url)
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            return list(compare_metadata(context, Base.metadata))
    finally:
        engine.dispose()


def test_migrated_schema_matches_the_models(db_url: str) -> None:
    assert current_revision(db_url) is None
    migrate(db_url)
    assert current_revision(db_url) == HEAD
    assert _schema_diff(db_url) == []


def test_an_empty_database_differs_from_the_models(db_url: str) -> None:
    diff = _schema_diff(db_url)  # proves the comparison above can fail
    assert {d[1].name for d in diff if d[0] == "add_table"} == set(Base.metadata.tables)  # type: ignore[index]


def test_concurrent_migrations_both_succeed_and_repeat_is_a_no_op(db_url: str) -> None:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            migrate(db_url)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    migrate(db_url)
    assert current_revision(db_url) == HEAD


def test_downgrade_to_base_and_upgrade_again(db_url: str) -> None:
    migrate(db_url)
    engine = create_engine_for(db_url)
    try:
        with engine.connect() as conn:
            command.downgrade(alembic_config(conn), "base")
            conn.commit()
            assert set(inspect(conn).get_table_names()) <= {"alembic_version"}
    finally:
        engine.dispose()
    migrate(db_url)
    assert _schema_diff(db_url) == []


def test_migrate_works_from_any_working_directory(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'elsewhere.db'}"
    code = "import sys; from storage.migrate import migrate; migrate(sys.argv[1])"
    subprocess.run([sys.executable, "-c", code, url], cwd=tmp_path, check=True, timeout=60)
    assert current_revision(url) == HEAD
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("elsewhere")) == []


def test_the_package_ships_the_migrations() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    include = config["packages"]["find"]["include"]
    # setuptools ships a directory as a package when it has __init__.py and its dotted name
    # matches an include pattern; migrations and versions must both be packages.
    for folder in (MIGRATIONS_DIR, MIGRATIONS_DIR / "versions"):
        dotted = ".".join(folder.relative_to(REPO).parts)
        assert (folder / "__init__.py").is_file(), folder
        assert any(fnmatch.fnmatch(dotted, pattern) for pattern in include), dotted
    patterns = config["package-data"]["*"]
    for path in MIGRATIONS_DIR.rglob("*"):
        if path.is_file() and path.suffix not in (".py", ".pyc"):
            assert any(fnmatch.fnmatch(path.name, p) for p in patterns), path
    assert (MIGRATIONS_DIR / "alembic.ini").is_file()
    assert (MIGRATIONS_DIR / "script.py.mako").is_file()


def _hierarchy(url: str, weights: tuple[float, float, float]) -> None:
    engine = create_engine_for(url)
    try:
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO tenants (id, name, weight, priority_tier, created_at) "
                    "VALUES (1, 't', :w, 0, 0)"
                ),
                {"w": weights[0]},
            )
            conn.execute(
                text(
                    "INSERT INTO applications (id, tenant_id, name, weight, created_at) "
                    "VALUES (1, 1, 'app', :w, 0)"
                ),
                {"w": weights[1]},
            )
            conn.execute(
                text(
                    "INSERT INTO agents (id, app_id, name, weight, created_at) "
                    "VALUES (1, 1, 'agent', :w, 0)"
                ),
                {"w": weights[2]},
            )
    finally:
        engine.dispose()


def _weights(url: str) -> list[float]:
    engine = create_engine_for(url)
    try:
        with engine.connect() as conn:
            return [
                conn.execute(text(f"SELECT weight FROM {table}")).scalar_one()
                for table in ("tenants", "applications", "agents")
            ]
    finally:
        engine.dispose()


def test_weights_are_clamped_into_the_api_range_and_sql_holds_it(db_url: str) -> None:
    """0006: weights written before the API's range (1e-6..1e6) are clamped, the rows that
    reference them survive (SQLite rebuilds each table, and dropping the old one with foreign
    keys on used to cascade: every application and agent was deleted), and SQL refuses weights
    outside the range from then on."""
    migrate(db_url, revision="0005")
    _hierarchy(db_url, (1e-9, 2.5, 5e9))
    migrate(db_url)
    assert _weights(db_url) == [1e-6, 2.5, 1e6]
    engine = create_engine_for(db_url)
    try:
        for weight in (1e-7, 2e6):
            with pytest.raises(IntegrityError), engine.begin() as conn:
                conn.execute(text("UPDATE agents SET weight = :w"), {"w": weight})
        with engine.begin() as conn:
            conn.execute(text("UPDATE agents SET weight = 1e-6"))
    finally:
        engine.dispose()


def test_the_alembic_command_line_downgrades_without_losing_rows(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    migrate(url)
    _hierarchy(url, (1.0, 2.0, 3.0))
    ini = MIGRATIONS_DIR / "alembic.ini"
    alembic = [sys.executable, "-m", "alembic", "-c", str(ini), "-x", f"url={url}"]
    subprocess.run([*alembic, "downgrade", "0005"], check=True, timeout=60, cwd=tmp_path)
    assert current_revision(url) == "0005"
    assert _weights(url) == [1.0, 2.0, 3.0]
    subprocess.run([*alembic, "upgrade", "head"], check=True, timeout=60, cwd=tmp_path)
    assert _weights(url) == [1.0, 2.0, 3.0]


def test_rows_dangling_before_a_migration_do_not_block_it(tmp_path: Path) -> None:
    """Only references a migration breaks are refused: a row already pointing at a missing
    parent (written with foreign keys off) must not stop every later start and command."""
    path = tmp_path / "orphan.db"
    url = f"sqlite:///{path}"
    migrate(url, revision="0005")
    with sqlite3.connect(path) as raw:  # foreign keys are off on a bare connection
        raw.execute(
            "INSERT INTO agents (id, app_id, name, weight, created_at) VALUES (9, 99, 'x', 1, 0)"
        )
    migrate(url)
    assert current_revision(url) == HEAD
    ini = MIGRATIONS_DIR / "alembic.ini"
    alembic = [sys.executable, "-m", "alembic", "-c", str(ini), "-x", f"url={url}"]
    subprocess.run([*alembic, "downgrade", "0005"], check=True, timeout=60, cwd=tmp_path)
    assert current_revision(url) == "0005"


def test_migrate_to_an_older_revision_downgrades_and_the_status_follows(db_url: str) -> None:
    order = history()
    assert schema_status(db_url) == SchemaStatus(None, HEAD, tuple(order))
    assert migrate(db_url) == (None, HEAD)
    assert schema_status(db_url).pending == ()
    assert migrate(db_url, revision=order[1]) == (HEAD, order[1])
    assert current_revision(db_url) == order[1]
    assert schema_status(db_url).pending == tuple(order[2:])
    assert migrate(db_url) == (order[1], HEAD)
    assert _schema_diff(db_url) == []


def test_a_database_a_newer_build_migrated_is_refused_and_left_as_it_is(db_url: str) -> None:
    migrated_by_a_newer_build(db_url)
    with pytest.raises(SchemaAhead, match=rf"'0099'.*migrate --to {HEAD}"):
        migrate(db_url)
    with pytest.raises(SchemaAhead):
        schema_status(db_url)
    assert current_revision(db_url) == "0099"


def test_a_process_of_the_older_release_runs_on_the_newer_schema(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """`Database.migrate` (the recorder's, `arbiter up`'s and `arbiter admin`'s start) leaves
    a newer build's schema as it is with a warning and goes on: during a rollout an old
    recorder restarts on the new schema, which migrations keep working for it (before:
    the recorder exited, and crash-looped until its own rollout)."""
    migrated_by_a_newer_build(db_url)
    db = Database(db_url)
    try:
        with caplog.at_level("WARNING", logger="storage.db"):
            db.migrate()
        assert "running on a newer schema" in caplog.text and "'0099'" in caplog.text
        with db.repos() as r:
            r.tenants.create_tenant(name="still-works")
    finally:
        db.dispose()
    assert current_revision(db_url) == "0099"


def test_an_unknown_target_revision_is_refused_before_connecting(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'never.db'}"
    with pytest.raises(UnknownRevision, match="'7'"):
        migrate(url, revision="7")
    assert not (tmp_path / "never.db").exists()


def test_an_unreachable_database_is_unavailable_and_its_password_not_shown() -> None:
    url = "postgresql+psycopg://arbiter:s3cret@127.0.0.1:1/none"
    for call in (lambda: migrate(url), lambda: schema_status(url)):
        with pytest.raises(StorageUnavailable, match="cannot reach") as caught:
            call()
        assert "s3cret" not in str(caught.value)


ACCEPTED: dict[str, set[str]] = {}
"""Per revision, the breaks `_breaks` reports that are allowed: a drop or rename made a release
after the code stopped using what it removes (name the release that stopped in a comment)."""

Shape = dict[str, dict[str, tuple[bool, bool]]]
"""table → column → (nullable, has a server default)."""


def _shape(url: str) -> Shape:
    engine = create_engine_for(url)
    try:
        with engine.connect() as conn:
            found = inspect(conn)
            return {
                t: {
                    c["name"]: (bool(c["nullable"]), c.get("default") is not None)
                    for c in found.get_columns(t)
                }
                for t in found.get_table_names()
                if t != "alembic_version"
            }
    finally:
        engine.dispose()


def _breaks(before: Shape, after: Shape) -> set[str]:
    """What in `after` the code written for `before` cannot live with."""
    broken = {f"table {t} dropped" for t in before if t not in after}
    for table, columns in before.items():
        new = after.get(table, columns)
        broken |= {f"{table}.{c} dropped" for c in columns if c not in new}
        broken |= {
            f"{table}.{c} added NOT NULL without a default"
            for c, (nullable, default) in new.items()
            if c not in columns and not nullable and not default
        }
        broken |= {
            f"{table}.{c} made NOT NULL without a default"
            for c, (nullable, default) in new.items()
            if c in columns and columns[c][0] and not nullable and not default
        }
    return broken


def test_the_additive_check_sees_what_breaks_the_release_before() -> None:
    before: Shape = {
        "t": {"a": (False, False), "b": (True, False), "e": (True, False), "f": (True, False)},
        "gone": {"x": (True, False)},
    }
    after: Shape = {
        "t": {
            "a": (False, False),
            "c": (False, False),
            "d": (False, True),
            "e": (False, False),
            "f": (False, True),
        }
    }
    assert _breaks(before, after) == {
        "table gone dropped",
        "t.b dropped",
        "t.c added NOT NULL without a default",
        "t.e made NOT NULL without a default",
    }
    assert _breaks(before, {**before, "new": {"y": (False, False)}}) == set()


@pytest.mark.parametrize("revision", history()[1:])
def test_each_migration_keeps_the_release_before_it_working(tmp_path: Path, revision: str) -> None:
    """Upgrades migrate while the previous release still serves (docs/operations.md, "Schema
    migrations"), so a migration only adds: no table or column dropped or renamed (a rename is
    a drop), and every new column of an existing table nullable or with a server default (the
    previous release's inserts do not name it), nor a nullable one made required without one.
    Checked on the SQLite schema before and after each revision; a new table may require what
    it likes. Not checked: new CHECK, UNIQUE or foreign-key constraints (a reviewer's job)."""
    order = history()
    url = f"sqlite:///{tmp_path / 'shape.db'}"
    migrate(url, revision=order[order.index(revision) - 1])
    before = _shape(url)
    migrate(url, revision=revision)
    assert _breaks(before, _shape(url)) == ACCEPTED.get(revision, set())
