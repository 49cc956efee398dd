"""`arbiter worker sim` refuses a bad flag before serving: one line naming it, exit status 2."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from workers.sim.cli import sim, sim_bench


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--profile", "nosuch"], "--profile: unknown latency profile 'nosuch'"),
        (["--speed", "0"], "--speed: Input should be greater than 0"),
        (["--max-num-seqs", "0"], "--max-num-seqs:"),
        (["--fail-rate", "2"], "--fail-rate:"),
        (["--log-level", "warn"], "--log-level: expected one of"),
    ],
)
def test_a_bad_flag_is_one_line_and_exit_2(args: list[str], flag: str) -> None:
    app = typer.Typer()
    app.command()(sim)
    app.command("other")(lambda: None)  # two commands: `sim` is invoked by name
    result = CliRunner().invoke(app, ["sim", "--port", "1", *args])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {flag}"), result.output
    assert "Traceback" not in result.output


def test_a_malformed_profile_file_names_the_flag(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nfoo: 1\n", encoding="utf-8")
    app = typer.Typer()
    app.command()(sim)
    app.command("other")(lambda: None)
    result = CliRunner().invoke(app, ["sim", "--port", "1", "--profile", str(bad)])
    assert result.exit_code == 2 and result.output.startswith("error: --profile:")


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--clients", "0"], "--clients: must be at least 1, got 0"),
        (["--duration", "0"], "--duration: must be a finite number > 0, got 0.0"),
        (["--speed", "inf"], "--speed: must be a finite number > 0, got inf"),
        (["--client", "curl"], "--client: expected one of httpx, raw, got 'curl'"),
        (["--profile", "nosuch"], "--profile: unknown latency profile 'nosuch'"),
    ],
)
def test_sim_bench_refuses_a_bad_flag_before_starting_a_worker(args: list[str], line: str) -> None:
    """Regression: each failed only after a worker process had started (an IndexError, a
    ZeroDivisionError after the whole run, a RuntimeError)."""
    app = typer.Typer()
    app.command("sim-bench")(sim_bench)
    app.command("other")(lambda: None)
    result = CliRunner().invoke(app, ["sim-bench", *args])
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines()[0].startswith(f"error: {line}"), result.output
