"""The `arbiter` command: groups, explicit registration, old flat names as hidden aliases."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from control_plane import cli
from control_plane.core.cli_errors import OptionError, user_errors


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


# Prints, in a fresh interpreter, whether the simulator was loaded and what `arbiter <argv[1]>`
# has.
_LOADS = """
import sys
from control_plane import cli
cli._register(sys.argv[1])
groups = {g.name: [c.name for c in g.typer_instance.registered_commands]
          for g in cli.app.registered_groups}
top = [c.name for c in cli.app.registered_commands]
print("control_plane.sim.engine_loop" in sys.modules, "migrate" in top, "simulate" in top,
      bool(groups["worker"]))
"""


@pytest.mark.parametrize(
    "command,loads",
    [
        ("gateway", "False False False False"),
        ("recorder", "False False False False"),
        ("migrate", "False True False False"),
        ("worker", "False False False True"),
        ("sim", "True False True False"),
        ("--help", "True True True True"),
        ("simulate", "True True True True"),  # a hidden alias: everything, as before
    ],
)
def test_a_command_loads_only_what_it_needs(command: str, loads: str) -> None:
    """Regression: every command registered every group, so a gateway, a recorder and
    `arbiter migrate` loaded the simulator and the benchmarks: 189 MB peak for a migration
    that needs 88 MB (docs/performance.md)."""
    done = subprocess.run(
        [sys.executable, "-c", _LOADS, command], capture_output=True, text=True, check=True
    )
    assert done.stdout.split("\n")[-2] == loads, done.stderr


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


@pytest.mark.parametrize(
    "command,expected",
    [
        (["sim", "run", "noisy-neighbour-short", "-p", "nosuch"], "--policy nosuch on"),
        (["sim", "run", "noisy-neighbour-short", "-p", "vtc", "--param", "vtc.zzz=1"], "zzz"),
        (["sim", "run", "noisy-neighbour-short", "-p", "vtc", "--param", "garbage"], "--param"),
        (
            ["sim", "run", "noisy-neighbour-short", "-p", "vtc", "--admission", "no"],
            "error: --admission: unknown admission 'no'",
        ),
        (["sim", "run", "noisy-neighbour-short", "-p", "a=vtc", "-p", "a=rr"], "--policy"),
        (["sim", "speed", "noisy-neighbour-short", "-p", "nosuch"], "unknown policy 'nosuch'"),
        (["up", "--policy", "nosuch"], "error: --policy: unknown policy 'nosuch'"),
        (["up", "--redis-fsync", "never"], "error: --redis-fsync: expected always or everysec"),
        (["up", "--tenant", "bad/name"], "error: --tenant: tenant name must be"),
        (["up", "--profile", "nosuch"], "error: --profile: unknown latency profile"),
        (["up", "--worker-kind", "vllm"], "error: --vllm-model: needed"),
        (["up", "--tenant", "a", "--tenant", "a"], "error: --tenant: given more than once: a"),
        (["up", "--console-port", "8080"], "error: --console-port: the gateway already uses"),
        (["up", "--database-url", "mysql://x"], "error: --database-url: expected"),
        (["admin", "tenants", "create", ""], "error: tenant name must be"),
        (["admin", "tenants", "create", "t", "--rate-limit", "-1"], "--rate-limit: must be"),
        (["admin", "report", "--step", "7"], "error: step must be one of"),
    ],
)
def test_bad_operator_input_is_one_line_naming_the_field_and_exit_2(
    runner: CliRunner, tmp_path: Path, command: list[str], expected: str
) -> None:
    state = tmp_path / "state"
    args = [*command, "--state-dir", str(state)] if command[0] == "up" else command
    args = [*args, "--out", str(tmp_path / "out")] if command[:2] == ["sim", "run"] else args
    env = {"ARBITER_DATABASE_URL": f"sqlite:///{tmp_path / 'a.db'}"}
    result = runner.invoke(cli.app, args, env=env)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and expected in lines[0], result.output
    assert "Traceback" not in result.output
    assert not state.exists() and not (tmp_path / "out").exists()  # nothing was started


@pytest.mark.parametrize(
    "command,option",
    [
        (["sim", "run", "noisy-neighbour-short", "-p", "vtc", "--duration", "-5"], "--duration"),
        (["sim", "run", "noisy-neighbour-short", "-p", "vtc", "--duration", "0"], "--duration"),
        (["sim", "speed", "noisy-neighbour-short", "--duration", "nan"], "--duration"),
        (["sim", "replay", "x", "--out", "o", "--speed", "0"], "--speed"),
        (["sim", "compare", "no-such.json", "no-such.json"], "does not exist"),
        (["up", "--speed", "0"], "--speed"),
        (["up", "--workers", "0"], "--workers"),
        (["admin", "tenants", "create", "t", "--weight", "0"], "--weight"),
        (["admin", "tenants", "create", "t", "--weight", "1e-306"], "--weight"),
        (["admin", "tenants", "update", "t", "--weight", "1e9"], "--weight"),
    ],
)
def test_out_of_range_flags_are_usage_errors(
    runner: CliRunner, command: list[str], option: str
) -> None:
    result = runner.invoke(cli.app, command, terminal_width=200)
    assert result.exit_code == 2 and option in result.output, result.output
    assert "Traceback" not in result.output


def test_a_bug_keeps_its_traceback() -> None:
    with pytest.raises(typer.Exit), user_errors("--x"):
        raise OptionError("bad")
    with pytest.raises(KeyError), user_errors("--x"):
        raise KeyError("a bug, not the operator's input")


def test_a_running_service_s_failure_is_not_reported_as_a_typo(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A plug-in error raised while a service runs (a bad knob read at takeover, not its
    flags) keeps its traceback instead of passing for a typo with exit 2."""
    import control_plane.scheduler.main as scheduler_main
    from control_plane.core.plugins import UnknownPluginError
    from control_plane.policies.registry import UnknownPolicyError

    def failing(*_: object, **__: object) -> None:
        raise UnknownPolicyError("unknown policy 'nosuch' (from the policy knob)")

    monkeypatch.setattr(scheduler_main, "run_scheduler", failing)
    result = CliRunner().invoke(cli.app, ["scheduler"])
    assert isinstance(result.exception, UnknownPluginError), result.output
    assert result.exit_code != 2


def test_up_refuses_a_state_dir_that_is_a_file(runner: CliRunner, tmp_path: Path) -> None:
    """Regression: a FileExistsError traceback when the state files were first written."""
    taken = tmp_path / "taken"
    taken.write_text("x")
    result = runner.invoke(cli.app, ["up", "--state-dir", str(taken)])
    assert result.exit_code == 2, result.output
    assert result.output.strip() == f"error: --state-dir: {taken} exists and is not a directory"
    under = runner.invoke(cli.app, ["up", "--state-dir", str(taken / "sub")])
    assert under.exit_code == 2, under.output
    assert (
        under.output.strip()
        == f"error: --state-dir: {taken / 'sub'}: {taken} is a file, not a directory"
    )


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="/proc refuses new files (Linux)")
def test_up_refuses_a_state_dir_it_cannot_make(runner: CliRunner) -> None:
    """Regression: a FileNotFoundError traceback (permission bits say yes to root)."""
    result = runner.invoke(cli.app, ["up", "--state-dir", "/proc/arbiter-state"])
    assert result.exit_code == 2, result.output
    assert result.output.startswith(
        "error: --state-dir: /proc/arbiter-state: /proc is not writable"
    )


def test_up_with_an_unreachable_database_says_so_and_stops_its_redis(tmp_path: Path) -> None:
    """Regression: a connection traceback, after `up` had started its Redis."""
    import subprocess
    import sys

    from tests.support.ports import free_port

    state = tmp_path / "state"
    args = ["up", "--no-console", "--state-dir", str(state), "--port", str(free_port())]
    args += ["--console-port", str(free_port())]
    args += ["--database-url", "postgresql+psycopg://arbiter:s3cret@127.0.0.1:1/arbiter"]
    done = subprocess.run(
        [sys.executable, "-m", "control_plane", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    out = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 1, out
    assert "arbiter up failed: cannot reach the database at" in out and "Traceback" not in out
    assert "s3cret" not in out
    ours = subprocess.run(["pgrep", "-f", str(state)], capture_output=True, text=True).stdout
    assert ours == ""  # the Redis it started (its data under the state dir) is gone
