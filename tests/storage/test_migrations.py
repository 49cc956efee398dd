"""Alembic: the migrated schema equals the models, upgrades are idempotent and safe to run
concurrently, and the migrations ship inside the package (any working directory)."""

from __future__ import annotations

import fnmatch
import subprocess
import sys
import threading
import tomllib
from pathlib import Path

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect

from storage.engine import create_engine_for
from storage.migrate import MIGRATIONS_DIR, alembic_config, current_revision, migrate
from storage.models import Base

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
