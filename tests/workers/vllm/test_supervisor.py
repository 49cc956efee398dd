"""The supervisor against a real child process (a small HTTP server posing as vLLM)."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.ports import free_port, wait_http
from workers.vllm.supervisor import Backoff, VllmSupervisor

CHILD = Path(__file__).with_name("child_http_server.py")
REPO = Path(__file__).resolve().parents[3]


def pid_alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def events(state: Path, kind: str) -> list[list[str]]:
    if not state.exists():
        return []
    return [line.split() for line in state.read_text().splitlines() if line.startswith(kind)]


def wait_for(predicate: object, timeout: float = 15.0) -> None:
    assert callable(predicate)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"condition not met within {timeout} s")


def child_env(state: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "CHILD_STATE": str(state), **extra}


def supervisor_for(state: Path, port: int, backoff: Backoff, **env: str) -> VllmSupervisor:
    return VllmSupervisor(
        [sys.executable, str(CHILD), "--port", str(port)],
        f"http://127.0.0.1:{port}/health",
        env=child_env(state, **env),
        backoff=backoff,
        startup_timeout_s=20,
        health_interval_s=0.1,
        stop_timeout_s=2,
    )


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "child.log"


def test_backoff_delays_grow_and_cap() -> None:
    b = Backoff(initial_s=0.5, factor=2, max_s=3)
    assert [b.delay(n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]


def test_dying_child_is_restarted_with_growing_backoff_then_given_up(state: Path) -> None:
    backoff = Backoff(initial_s=0.3, factor=2.0, max_s=10, max_restarts=3, stable_after_s=60)
    sup = supervisor_for(state, free_port(), backoff, CHILD_EXIT_AFTER="0.3")
    assert sup.run() == 1  # gave up
    starts = [float(e[2]) for e in events(state, "start")]
    assert len(starts) == 4 == sup.starts  # the first run plus max_restarts restarts
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    # each gap = 0.3 s of life + detection + the backoff delay (0.3, 0.6, 1.2 s)
    for gap, delay in zip(gaps, (0.3, 0.6, 1.2), strict=True):
        assert gap >= delay + 0.3
    assert gaps[0] < gaps[1] < gaps[2]


def test_unhealthy_child_is_replaced(state: Path) -> None:
    port = free_port()
    backoff = Backoff(initial_s=0.1, max_restarts=5)
    sup = supervisor_for(state, port, backoff, CHILD_UNHEALTHY_AFTER="0.5")
    thread = threading.Thread(target=sup.run)
    thread.start()
    try:
        wait_for(lambda: len(events(state, "start")) >= 2)
        first_pid = int(events(state, "start")[0][1])
        assert ["term", str(first_pid)] in events(state, "term")  # stopped before the restart
        wait_http(f"http://127.0.0.1:{port}/health", timeout=10)
    finally:
        sup.stop()
        thread.join(timeout=10)
    assert not thread.is_alive()


def test_whole_process_group_is_stopped_when_the_child_dies(state: Path) -> None:
    backoff = Backoff(initial_s=0.2, max_restarts=1)
    sup = supervisor_for(state, free_port(), backoff, CHILD_EXIT_AFTER="0.5", CHILD_GRANDCHILD="1")
    assert sup.run() == 1
    grandchildren = [int(e[1]) for e in events(state, "grandchild")]
    assert len(grandchildren) == 2
    assert not any(pid_alive(pid) for pid in grandchildren)


@pytest.fixture
def fake_vllm_python(tmp_path: Path) -> Path:
    """An executable that `arbiter worker vllm --python` can run as if it were vLLM's python."""
    script = tmp_path / "python"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{CHILD}" "$@"\n')
    script.chmod(0o755)
    return script


def start_cli(python: Path, port: int, state: Path, **env: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "workers.vllm", "vllm", "--model", "m", "--port", str(port)]
    cmd += ["--python", str(python), "--stop-timeout", "2", "--", "--load-format", "dummy"]
    return subprocess.Popen(
        cmd, cwd=REPO, env=child_env(state, **env), stdout=subprocess.PIPE, text=True
    )


@pytest.fixture
def cli_procs() -> Iterator[list[subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_cli_stops_the_child_gracefully_on_signal(
    sig: signal.Signals, fake_vllm_python: Path, state: Path, cli_procs: list[subprocess.Popen[str]]
) -> None:
    port = free_port()
    proc = start_cli(fake_vllm_python, port, state, CHILD_GRANDCHILD="1")
    cli_procs.append(proc)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip().startswith(f"vLLM ready at http://127.0.0.1:{port}/v1")
    child = int(events(state, "start")[0][1])
    grandchild = int(events(state, "grandchild")[0][1])
    proc.send_signal(sig)
    assert proc.wait(timeout=15) == 0
    assert events(state, "term") == [["term", str(child)]]  # SIGTERM first, it then exited
    assert not pid_alive(child) and not pid_alive(grandchild)


def test_cli_kills_a_child_that_ignores_sigterm(
    fake_vllm_python: Path, state: Path, cli_procs: list[subprocess.Popen[str]]
) -> None:
    port = free_port()
    proc = start_cli(fake_vllm_python, port, state, CHILD_IGNORE_TERM="1")
    cli_procs.append(proc)
    wait_http(f"http://127.0.0.1:{port}/health", timeout=20)
    child = int(events(state, "start")[0][1])
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=15) == 0
    assert time.monotonic() - t0 >= 1.9  # waited the 2 s stop timeout before SIGKILL
    assert events(state, "term") == [["term", str(child)]]
    assert not pid_alive(child)
