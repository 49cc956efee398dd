"""The `arbiter` command: groups, explicit registration, old flat names as hidden aliases."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from control_plane import cli


@pytest.fixture(scope="module")
def runner() -> CliRunner:
    cli._register()
    return CliRunner()


def test_the_top_level_lists_processes_and_groups_only(runner: CliRunner) -> None:
    out = runner.invoke(cli.app, ["--help"], terminal_width=200).output
    listed = {
        line.split()[1] for line in out.splitlines() if line.startswith("│ ") and line[2] != " "
    }
    groups = {"worker", "sim", "bench", "admin"}
    assert listed >= {"gateway", "scheduler", "recorder", "up"} | groups
    assert not listed & {"simulate", "bench-soak", "tenants", "scenarios", "report"}


@pytest.mark.parametrize(
    "group,commands",
    [
        ("sim", ("run", "speed", "capacity", "compare", "scenarios", "replay")),
        ("bench", ("overhead", "faults", "soak", "decisions")),
        ("admin", ("tenants", "keys", "report")),
    ],
)
def test_each_group_has_its_commands(
    runner: CliRunner, group: str, commands: tuple[str, ...]
) -> None:
    result = runner.invoke(cli.app, [group, "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    for command in commands:
        assert f" {command} " in result.output, command


@pytest.mark.parametrize(
    "old,new",
    [
        (
            ["simulate-capacity", "noisy-neighbour-short"],
            ["sim", "capacity", "noisy-neighbour-short"],
        ),
        (["scenarios"], ["sim", "scenarios"]),
    ],
)
def test_old_names_still_run_the_same_command(
    runner: CliRunner, old: list[str], new: list[str]
) -> None:
    before, after = runner.invoke(cli.app, old), runner.invoke(cli.app, new)
    assert before.exit_code == after.exit_code == 0, before.output + after.output
    assert before.output == after.output


def test_a_bad_option_names_it(runner: CliRunner) -> None:
    result = runner.invoke(cli.app, ["bench", "soak", "--minutes", "0"])
    assert result.exit_code == 2 and "--minutes" in result.output


@pytest.mark.parametrize(
    "command,env,expected",
    [
        (
            ["scheduler"],
            {"ARBITER_CHECKPOINT_INTERVAL_S": "abc"},
            "error: ARBITER_CHECKPOINT_INTERVAL_S: Input should be a valid number",
        ),
        (["recorder"], {"ARBITER_REDIS_URL": "localhost"}, "error: ARBITER_REDIS_URL: expected"),
        (["gateway", "--database-url", "mysql://x"], {}, "error: --database-url: expected"),
        (["scheduler"], {"ARBITER_WORKERS": "w1:8000"}, "error: ARBITER_WORKERS: 'w1:8000'"),
        (["scheduler"], {"ARBITER_POLICY": "nope"}, "error: ARBITER_POLICY: unknown policy"),
        (["scheduler", "--policy", "nope"], {}, "error: --policy: unknown policy 'nope'"),
        (["admin", "tenants", "list"], {"ARBITER_DATABASE_URL": "x"}, "ARBITER_DATABASE_URL"),
    ],
)
def test_bad_settings_are_one_line_naming_the_variable_and_exit_2(
    runner: CliRunner, command: list[str], env: dict[str, str], expected: str
) -> None:
    result = runner.invoke(cli.app, command, env=env)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and expected in lines[0], result.output
    assert "Traceback" not in result.output
