"""`arbiter migrate`: a deployment step that says where the schema stands (`--check`, exit 3
when a migration is due), migrates to this build's head or down to an older revision, and
answers an unreachable database, a newer build's schema and an unknown revision in one line."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from control_plane import cli
from control_plane.schema_cli import AHEAD, DUE
from storage.db import Database
from storage.migrate import current_revision, history
from tests.storage.test_requests import _request
from tests.support.schema import migrated_by_a_newer_build

HEAD = history()[-1]


@pytest.fixture(scope="module")
def runner() -> CliRunner:
    cli._register()
    return CliRunner()


def _migrate(runner: CliRunner, url: str, *args: str) -> tuple[int, str]:
    result = runner.invoke(cli.app, ["migrate", "--database-url", url, *args], terminal_width=300)
    return result.exit_code, result.output.strip()


def test_check_migrate_and_downgrade(runner: CliRunner, db_url: str) -> None:
    order = history()
    code, out = _migrate(runner, db_url, "--check")
    assert code == DUE and f"{len(order)} to apply: {', '.join(order)}" in out, out
    assert current_revision(db_url) is None  # --check changed nothing
    assert _migrate(runner, db_url)[1].endswith(f"migrated from base (empty) to {HEAD}")
    assert _migrate(runner, db_url)[1].endswith(f"already at {HEAD}; nothing to do")
    code, out = _migrate(runner, db_url, "--check")
    assert code == 0 and out.endswith("up to date"), out
    code, out = _migrate(runner, db_url, "--to", order[-2])
    assert code == 0 and out.endswith(f"migrated from {HEAD} to {order[-2]}"), out
    code, out = _migrate(runner, db_url, "--check")
    assert code == DUE and out.endswith(f"1 to apply: {HEAD}"), out


def test_a_newer_build_s_schema_is_one_line_and_untouched(
    runner: CliRunner, tmp_path: Path
) -> None:
    """An older pod restarted during a rolling update runs `arbiter migrate` first: it must
    succeed on the newer, additive schema (an explicit `--to` it cannot do is refused)."""
    url = f"sqlite:///{tmp_path / 'a.db'}"
    migrated_by_a_newer_build(url, "0999")
    shown = f"sqlite:///{tmp_path / 'a.db'}: the database is at revision '0999'"
    expected = {(): (0, f"warning: {shown}"), ("--check",): (AHEAD, shown)}
    expected[("--to", HEAD)] = expected[()]  # this build's head by its name
    expected[("--to", "base")] = (1, "error: the database is at revision '0999'")
    expected[("--to", history()[0])] = expected[("--to", "base")]
    for args, (code_wanted, start) in expected.items():
        code, out = _migrate(runner, url, *args)
        assert code == code_wanted and out.startswith(start) and "\n" not in out, (args, out)
        assert code == 1 or out.endswith("this build runs on it as it is"), out
    assert current_revision(url) == "0999"


def test_an_unknown_revision_names_the_flag(runner: CliRunner, tmp_path: Path) -> None:
    code, out = _migrate(runner, f"sqlite:///{tmp_path / 'a.db'}", "--to", "nosuch")
    assert code == 2
    assert out.startswith("error: --to: revision 'nosuch' is not one of this build's")
    code, out = _migrate(runner, f"sqlite:///{tmp_path / 'a.db'}", "--to", "000")
    assert code == 2 and out.startswith("error: --to: revision '000' names several of")
    assert not (tmp_path / "a.db").exists()


def test_the_flag_alone_is_checked_when_given(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An init container or an operator's shell with an unrelated bad variable still
    migrates with `--database-url` (the flag needs no other setting)."""
    monkeypatch.setenv("ARBITER_WORKERS", "not a worker list")
    code, out = _migrate(runner, f"sqlite:///{tmp_path / 'a.db'}")
    assert code == 0 and out.endswith(f"to {HEAD}"), out
    result = runner.invoke(cli.app, ["migrate"], terminal_width=300)
    assert result.exit_code == 2 and result.output.startswith("error: ARBITER_WORKERS")


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("bogus", "expected sqlite:///path.db"),
        ("postgresql+psycopg://a:s3cret@db:notaport/x", "not a database URL SQLAlchemy can read"),
    ],
)
def test_a_malformed_url_is_one_line_naming_the_flag(
    runner: CliRunner, url: str, says: str
) -> None:
    """Regression: a URL SQLAlchemy cannot parse was a traceback (here and in `arbiter admin`)."""
    for args in (["migrate"], ["admin", "tenants", "list"]):
        result = runner.invoke(cli.app, [*args, "--database-url", url], terminal_width=300)
        out = result.output.strip()
        assert result.exit_code == 2, out
        assert out.startswith(f"error: --database-url: {says}") and "\n" not in out, out
        assert "s3cret" not in out


def test_an_unreachable_database_is_one_line_without_its_password(tmp_path: Path) -> None:
    """As a real process (stderr and the exit status as a deployment's init container sees
    them); the admin commands answer the same way (before: a traceback)."""
    url = "postgresql+psycopg://arbiter:s3cret@127.0.0.1:1/arbiter"
    for args in (["migrate"], ["migrate", "--check"], ["admin", "tenants", "list"]):
        done = subprocess.run(
            [sys.executable, "-m", "control_plane", *args, "--database-url", url],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tmp_path,
        )
        assert done.returncode == 1, done.stderr
        lines = (done.stdout + done.stderr).strip().splitlines()
        assert len(lines) == 1 and "cannot reach the database at" in lines[0], lines
        assert "s3cret" not in done.stdout + done.stderr


def _three_rows(runner: CliRunner, db_url: str) -> tuple[Database, float]:
    """A migrated database with requests that arrived 9, 8 and 0 days ago; → it, and now."""
    assert _migrate(runner, db_url)[0] == 0
    db = Database(db_url)
    now = time.time()
    with db.repos() as r:
        r.requests.insert_many(
            [
                dataclasses.replace(_request(i), arrival=now - a * 86_400)
                for i, a in enumerate((9, 8, 0))
            ]
        )
    return db, now


def test_prune_history_deletes_old_rows_and_refuses_a_cut_under_a_day(
    runner: CliRunner, db_url: str
) -> None:
    db, _ = _three_rows(runner, db_url)
    for bad in ("0.5", "nan", "x", "100001", "1e400"):  # a cut before year 1 was a traceback
        result = runner.invoke(
            cli.app, ["prune-history", "--older-than-days", bad, "--database-url", db_url]
        )
        assert result.exit_code == 2 and "--older-than-days" in result.output, (bad, result.output)
    result = runner.invoke(
        cli.app, ["prune-history", "--older-than-days", "7", "--database-url", db_url]
    )
    assert result.exit_code == 0 and "deleted 2 request rows that arrived before" in result.output
    with db.reader() as r:
        assert r.requests.count() == 1
    db.dispose()


def test_prune_history_on_a_database_not_migrated_says_so_in_one_line(
    runner: CliRunner, tmp_path: Path
) -> None:
    """Before, the driver's message came with its SQL over several lines."""
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    result = runner.invoke(
        cli.app, ["prune-history", "--older-than-days", "7", "--database-url", url]
    )
    assert result.exit_code == 1, result.output
    (line,) = result.output.strip().splitlines()
    assert line.startswith("error: ") and "run `arbiter migrate` first" in line, line


def test_prune_history_minute_rollups_alone_and_its_errors(runner: CliRunner, db_url: str) -> None:
    db, now = _three_rows(runner, db_url)
    with db.reader() as r:
        report = r.rollups.report(start=now - 10 * 86_400, end=now + 60, level="tenant")

    def prune(*args: str) -> tuple[int, str]:
        result = runner.invoke(
            cli.app, ["prune-history", *args, "--database-url", db_url], terminal_width=300
        )
        return result.exit_code, result.output

    code, output = prune()
    assert code == 2 and "--older-than-days, --minute-rollups-older-than-days" in output
    for bad in ("1", "nan", "x", "100001", "1e400"):
        code, output = prune("--minute-rollups-older-than-days", bad)
        assert code == 2 and "--minute-rollups-older-than-days" in output, (bad, output)
        code, output = prune("--older-than-days", "7", "--minute-rollups-older-than-days", bad)
        assert code == 2 and "--minute-rollups-older-than-days" in output, (bad, output)
    with db.reader() as r:
        assert r.rollups.minute_horizon() is None and r.requests.count() == 3

    code, output = prune("--minute-rollups-older-than-days", "7")
    assert code == 0 and "deleted 6 minute rollup rows before" in output, output
    assert "request rows" not in output
    with db.reader() as r:
        assert r.requests.count() == 3  # the request rows stay
        horizon = r.rollups.minute_horizon()
        assert horizon is not None and horizon % 3600 == 0 and horizon <= now - 7 * 86_400
        widened = r.rollups.report(start=now - 10 * 86_400, end=now + 60, level="tenant")
    assert [n.requests for n in widened.nodes] == [n.requests for n in report.nodes] == [3]
    assert widened.start <= report.start and widened.end == report.end

    code, output = prune("--older-than-days", "7", "--minute-rollups-older-than-days", "2")
    assert code == 0 and "deleted 2 request rows" in output and "deleted 0 minute" in output
    db.dispose()
