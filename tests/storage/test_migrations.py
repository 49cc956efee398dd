"""Alembic: the migrated schema equals the models, upgrades are idempotent and safe to run
concurrently, and the migrations ship inside the package (any working directory)."""

from __future__ import annotations

import fnmatch
import sqlite3
import subprocess
import sys
import threading
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text
from sqlalchemy.engine import Inspector
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


_IN_RANGE = "CHECK (weight >= 1e-06 AND weight <= 1000000.0) added"
ACCEPTED: dict[str, set[str]] = {
    # the API and the CLI refuse weights outside 1e-6..1e6 since b538279, before 0005's
    # release: its writes already meet the new check (and 0006 clamps the rows before it)
    "0006": {f"{t}: {_IN_RANGE}" for t in ("tenants", "applications", "agents")},
}
"""Per revision, the breaks `_breaks` reports that are allowed, each with the reason in a
comment: a drop or rename made a release after the code stopped using what it removes (name
that release), a constraint the release before already kept in its own code (name where)."""


@dataclass(frozen=True)
class Table:
    """One table's shape: column → (nullable, has a server default), and its constraints as
    text (CHECK, UNIQUE, FOREIGN KEY, unique index)."""

    columns: dict[str, tuple[bool, bool]]
    constraints: frozenset[str] = frozenset()


Shape = dict[str, Table]


def _shape(url: str) -> Shape:
    engine = create_engine_for(url)
    try:
        with engine.connect() as conn:
            found = inspect(conn)
            return {
                t: Table(
                    {
                        c["name"]: (bool(c["nullable"]), c.get("default") is not None)
                        for c in found.get_columns(t)
                    },
                    _constraints(found, t),
                )
                for t in found.get_table_names()
                if t != "alembic_version"
            }
    finally:
        engine.dispose()


def _constraints(found: Inspector, table: str) -> frozenset[str]:
    def cols(names: list[str | None] | list[str]) -> str:
        return ", ".join(str(n) for n in names)

    return frozenset(
        [f"CHECK ({c['sqltext']})" for c in found.get_check_constraints(table)]
        + [f"UNIQUE ({cols(u['column_names'])})" for u in found.get_unique_constraints(table)]
        + [
            f"FOREIGN KEY ({cols(f['constrained_columns'])}) REFERENCES "
            f"{f['referred_table']} ({cols(f['referred_columns'])})"
            for f in found.get_foreign_keys(table)
        ]
        + [
            f"UNIQUE INDEX ({cols(i['column_names'])})"
            for i in found.get_indexes(table)
            if i.get("unique")
        ]
    )


def _breaks(before: Shape, after: Shape) -> set[str]:
    """What in `after` the code written for `before` cannot live with."""
    broken = {f"table {t} dropped" for t in before if t not in after}
    for table, was in before.items():
        now = after.get(table, was)
        columns, new = was.columns, now.columns
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
        broken |= {f"{table}: {c} added" for c in now.constraints - was.constraints}
    return broken


def test_the_additive_check_sees_what_breaks_the_release_before() -> None:
    before: Shape = {
        "t": Table(
            {"a": (False, False), "b": (True, False), "e": (True, False), "f": (True, False)},
            frozenset({"CHECK (a > 0)"}),
        ),
        "gone": Table({"x": (True, False)}),
    }
    after: Shape = {
        "t": Table(
            {
                "a": (False, False),
                "c": (False, False),
                "d": (False, True),
                "e": (False, False),
                "f": (False, True),
            },
            frozenset({"UNIQUE (a)"}),  # a check dropped: the older code still writes well
        )
    }
    assert _breaks(before, after) == {
        "table gone dropped",
        "t.b dropped",
        "t.c added NOT NULL without a default",
        "t.e made NOT NULL without a default",
        "t: UNIQUE (a) added",
    }
    new_table = Table({"y": (False, False)}, frozenset({"CHECK (y > 1)"}))
    assert _breaks(before, {**before, "new": new_table}) == set()


@pytest.mark.parametrize("revision", history()[1:])
def test_each_migration_keeps_the_release_before_it_working(tmp_path: Path, revision: str) -> None:
    """Upgrades migrate while the previous release still serves (docs/operations.md, "Schema
    migrations"), so a migration only adds: no table or column dropped or renamed (a rename is
    a drop), and every new column of an existing table nullable or with a server default (the
    previous release's inserts do not name it), nor a nullable one made required without one.
    Nor a CHECK, UNIQUE or foreign-key constraint (or a unique index) added to an existing
    table: the previous release's writes may break it, unless its own code already kept it
    (then `ACCEPTED` says where). Checked on the SQLite schema before and after each revision;
    a new table may require what it likes."""
    order = history()
    url = f"sqlite:///{tmp_path / 'shape.db'}"
    migrate(url, revision=order[order.index(revision) - 1])
    before = _shape(url)
    migrate(url, revision=revision)
    assert _breaks(before, _shape(url)) == ACCEPTED.get(revision, set())
