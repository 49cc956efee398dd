"""`arbiter worker vllm` refuses a bad number before starting vLLM: one line naming it, exit 2."""

from __future__ import annotations

import sys

import pytest
import typer
from typer.testing import CliRunner

from workers.vllm import cli
from workers.vllm.supervisor import Backoff


class _Started(Exception):
    """The command got as far as starting the supervisor."""


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, object]]:
    """Supervisors the command built (none is run: building one raises `_Started`)."""
    built: list[dict[str, object]] = []

    def supervisor(*_args: object, **kwargs: object) -> None:
        built.append(kwargs)
        raise _Started

    monkeypatch.setattr(cli, "VllmSupervisor", supervisor)
    return built


def _invoke(*args: str) -> tuple[int, str, BaseException | None]:
    app = typer.Typer()
    cli.register(app)
    result = CliRunner().invoke(app, ["vllm", "--model", "m", "--python", sys.executable, *args])
    return result.exit_code, result.output, result.exception


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--backoff", "-1"], "--backoff: must be a finite number >= 0, got -1.0"),
        (["--backoff", "nan"], "--backoff: must be a finite number >= 0, got nan"),
        (["--backoff", "inf"], "--backoff: must be a finite number >= 0, got inf"),
        (["--startup-timeout", "0"], "--startup-timeout: must be a finite number > 0, got 0.0"),
        (["--startup-timeout", "nan"], "--startup-timeout: must be a finite number > 0, got nan"),
        (["--stop-timeout", "-1"], "--stop-timeout: must be a finite number >= 0, got -1.0"),
        (["--stop-timeout", "inf"], "--stop-timeout: must be a finite number >= 0, got inf"),
        (["--max-restarts", "-1"], "--max-restarts: must be at least 0, got -1"),
        (["--port", "0"], "--port: must be a TCP port (1 to 65535), got 0"),
        (["--port", "70000"], "--port: must be a TCP port (1 to 65535), got 70000"),
    ],
)
def test_a_bad_number_is_one_line_before_vllm_starts(
    started: list[dict[str, object]], args: list[str], line: str
) -> None:
    """Regression: `--backoff -1` (and the others) were accepted and failed only when vLLM
    was restarted, stopped or never became healthy."""
    code, output, _ = _invoke(*args)
    assert code == 2, output
    assert output.strip().splitlines() == [f"error: {line}"], output
    assert started == []


def test_good_numbers_reach_the_supervisor(started: list[dict[str, object]]) -> None:
    args = ["--backoff", "0", "--stop-timeout", "0", "--max-restarts", "0", "--port", "65535"]
    _, output, exception = _invoke(*args)
    assert isinstance(exception, _Started), output
    (kwargs,) = started
    assert kwargs["backoff"] == Backoff(initial_s=0.0, max_restarts=0)
    assert kwargs["stop_timeout_s"] == 0.0
