"""`arbiter bench …` refuses every bad flag before it starts anything: one line naming the
flag and exit status 2 (no traceback), through the real command line (issue 15, item 7).

Every command's work (`measure`, `run`, `run_all`, `run_soak`) is replaced by a tripwire, so
a flag that slipped through fails the test instead of starting a deployment or a timed loop.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from control_plane import cli

WORK = (
    ("control_plane.bench.overhead", "measure"),
    ("control_plane.bench.decisions", "run"),
    ("control_plane.bench.perception", "run"),
    ("control_plane.bench.fault_bench", "run_all"),
    ("control_plane.bench.soak_run", "run_soak"),
    ("control_plane.bench.multimodal", "run"),
    ("control_plane.bench.workflows_live", "run"),
    ("control_plane.bench.recorder_bench", "measure"),
)


def _tripwire(*_: object, **__: object) -> None:
    raise AssertionError("a bad flag got through: the command started its work")


@pytest.fixture(scope="module")
def runner() -> CliRunner:
    cli._register()
    return CliRunner()


@pytest.fixture
def nothing_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    for module, name in WORK:
        monkeypatch.setattr(importlib.import_module(module), name, _tripwire)


def _paths(tmp_path: Path) -> dict[str, str]:
    """A plain file, a directory, a file that is not an up.json, an up.json without globex."""
    (tmp_path / "file").write_text("not a directory\n")
    (tmp_path / "up-acme.json").write_text(
        json.dumps({"gateway_url": "http://127.0.0.1:9", "tenants": {"acme": "k"}})
    )
    return {
        "FILE": str(tmp_path / "file"),
        "UNDER_FILE": str(tmp_path / "file" / "out.json"),
        "DIR": str(tmp_path),
        "UP_ACME": str(tmp_path / "up-acme.json"),
    }


BAD_VALUES = [
    (["bench", "overhead", "--concurrency", "0"], "--concurrency: every value must be at least 1"),
    (["bench", "overhead", "--concurrency", "-3"], "--concurrency: every value must be at least 1"),
    (["bench", "overhead", "--requests", "0"], "--requests: must be at least 1, got 0"),
    (["bench", "overhead", "--workers", "0"], "--workers: must be at least 1, got 0"),
    (["bench", "overhead", "--speed", "0"], "--speed: must be a finite number > 0, got 0"),
    (["bench", "overhead", "--speed", "nan"], "--speed: must be a finite number > 0, got nan"),
    (["bench", "overhead", "--speed", "inf"], "--speed: must be a finite number > 0, got inf"),
    (["bench", "overhead", "--policy", "nosuch"], "--policy: unknown policy 'nosuch'"),
    (["bench", "overhead", "--profile", "FILE"], "--profile: FILE is a file, not a directory"),
    (
        ["bench", "overhead", "--profile", "DIR", "--profile-concurrency", "5"],
        "--profile-concurrency: 5 is not one of the measured levels (1, 64, 128)",
    ),
    (["bench", "overhead", "--out", "DIR"], "--out: DIR is a directory; give a file name"),
    (["bench", "overhead", "--out", "UNDER_FILE"], "FILE is a file, not a directory"),
    (["bench", "overhead", "--redis-fsync", "no"], "--redis-fsync: expected always or everysec"),
    (["bench", "decisions", "--leaves", "0"], "--leaves: every value must be at least 1, got 0"),
    (["bench", "decisions", "--out", "DIR"], "--out: DIR is a directory"),
    (["bench", "recorder", "--batch", "0"], "--batch: every value must be at least 1, got 0"),
    (["bench", "recorder", "--out", "DIR"], "--out: DIR is a directory"),
    (["bench", "perception", "--scenario", "nosuch"], "--scenario: no scenario 'nosuch'"),
    (["bench", "perception", "--out", "UNDER_FILE"], "--out: UNDER_FILE: FILE is a file"),
    (["bench", "faults", "--speed", "inf"], "--speed: must be a finite number > 0, got inf"),
    (["bench", "faults", "--bound-s", "inf"], "--bound-s: must be a finite number ≥ 1, got inf"),
    (["bench", "faults", "--up-arg", "--bogus"], "--up-arg: --bogus: No such option: --bogus"),
    (
        ["bench", "faults", "--up-arg", "--workers", "--up-arg", "many"],
        "--up-arg: --workers many: Invalid value for '--workers'",
    ),
    (["bench", "faults", "--up-arg", "--help"], "--up-arg: --help is not a flag"),
    (["bench", "faults", "--state-dir", "FILE"], "--state-dir: FILE is a file, not a directory"),
    (["bench", "faults", "--out", "DIR"], "--out: DIR is a directory"),
    (["bench", "soak", "--rate", "inf"], "--rate: must be a finite number > 0, got inf"),
    (["bench", "soak", "--minutes", "inf"], "--minutes: must be a finite number > 0, got inf"),
    (["bench", "soak", "--minutes", "1"], "--minutes: 1 leaves 0 samples after the 180 s"),
    (["bench", "soak", "--minutes", "7"], "the verdict needs 6: run at least 8 minutes"),
    (["bench", "soak", "--attach", "FILE"], "--attach: FILE is not JSON"),
    (["bench", "soak", "--attach", "UP_ACME"], "--attach: UP_ACME has no key of tenant globex"),
    (["bench", "soak", "--state-dir", "FILE"], "--state-dir: FILE is a file, not a directory"),
    (["bench", "soak", "--out", "DIR"], "--out: DIR is a directory"),
    (["bench", "hmfs-multimodal", "--policy", "nosuch"], "--policy: unknown policy 'nosuch'"),
    (["bench", "hmfs-multimodal", "--speed", "inf"], "--speed: must be a finite number > 0"),
    (["bench", "hmfs-multimodal", "--tolerance", "-1"], "--tolerance: must be a finite number ≥ 0"),
    (["bench", "hmfs-multimodal", "--tolerance", "nan"], "--tolerance: must be a finite number"),
    (["bench", "hmfs-multimodal", "--state-dir", "FILE"], "--state-dir: FILE is a file"),
    (["bench", "hmfs-multimodal", "--out", "UNDER_FILE"], "--out: UNDER_FILE: FILE is a file"),
    (["bench", "workflows", "--scenario", "nosuch"], "--scenario: no scenario 'nosuch'"),
    (["bench", "workflows", "--scenario", "exfairs-I"], "--scenario: exfairs-I has no workflows"),
    (["bench", "workflows", "--policy", "nosuch"], "--policy: unknown policy 'nosuch'"),
    (["bench", "workflows", "--placement", "nosuch"], "--placement: unknown placement 'nosuch'"),
    (["bench", "workflows", "--tolerance", "-1"], "--tolerance: must be a finite number ≥ 0"),
    (["bench", "workflows", "--speed", "inf"], "--speed: must be a finite number > 0, got inf"),
    (["bench", "workflows", "--state-dir", "FILE"], "--state-dir: FILE is a file"),
    (["bench", "workflows", "--out", "DIR"], "--out: DIR is a directory"),
    (["bench-overhead", "--policy", "nosuch"], "--policy: unknown policy 'nosuch'"),
    (["bench-soak", "--minutes", "1"], "--minutes: 1 leaves 0 samples"),
    (["bench-faults", "--up-arg", "--bogus"], "--up-arg: --bogus: No such option"),
]


@pytest.mark.parametrize("command,expected", BAD_VALUES)
@pytest.mark.usefixtures("nothing_starts")
def test_a_bad_flag_is_one_line_naming_it_and_exit_2(
    runner: CliRunner, tmp_path: Path, command: list[str], expected: str
) -> None:
    paths = _paths(tmp_path)
    args = [paths.get(a, a) for a in command]
    for name, path in sorted(paths.items(), key=lambda kv: -len(kv[0])):
        expected = expected.replace(name, path)
    result = runner.invoke(cli.app, args, terminal_width=200)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert expected in lines[0], result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    "command,option",
    [
        (["bench", "overhead", "--rounds", "0"], "--rounds"),
        (["bench", "decisions", "--pops", "0"], "--pops"),
        (["bench", "decisions", "--jobs-per-leaf", "0"], "--jobs-per-leaf"),
        (["bench", "decisions", "--policy", "nosuch"], "--policy"),
        (["bench", "perception", "--rounds", "5"], "--rounds"),
        (["bench", "faults", "--fault", "nosuch"], "unknown fault 'nosuch'"),
        (["bench", "faults", "--requests", "0"], "--requests"),
        (["bench", "faults", "--workers", "1"], "--workers"),
        (["bench", "faults", "--speed", "nan"], "--speed"),
        (["bench", "soak", "--minutes", "0"], "--minutes"),
        (["bench", "soak", "--load", "nan"], "--load"),
        (["bench", "soak", "--attach", "/no/such/up.json"], "--attach"),
        (["bench", "hmfs-multimodal", "--duration", "5"], "--duration"),
        (["bench", "workflows", "--duration", "nan"], "--duration"),
    ],
)
@pytest.mark.usefixtures("nothing_starts")
def test_out_of_range_flags_are_usage_errors_naming_them(
    runner: CliRunner, command: list[str], option: str
) -> None:
    result = runner.invoke(cli.app, command, terminal_width=200)
    assert result.exit_code == 2 and option in result.output, result.output
    assert "Traceback" not in result.output


@pytest.mark.usefixtures("nothing_starts")
def test_good_values_pass_the_checks(runner: CliRunner, tmp_path: Path) -> None:
    """Only the bad flag is named: the defaults, a valid `arbiter up` flag for the faults'
    deployments and an output under a directory still to be made all pass."""
    out = str(tmp_path / "new" / "dir" / "out.json")
    up_arg = ["--up-arg", "--max-num-seqs", "--up-arg", "4"]
    result = runner.invoke(cli.app, ["bench", "faults", *up_arg, "--out", out, "--speed", "inf"])
    assert result.exit_code == 2
    assert result.output.strip() == "error: --speed: must be a finite number > 0, got inf"
    assert not (tmp_path / "new").exists()  # refused before anything was written
    result = runner.invoke(cli.app, ["bench", "decisions", "--leaves", "3", "--out", out])
    assert isinstance(result.exception, AssertionError)  # reached its work: the tripwire
