"""`arbiter bench overhead` as a real process: SIGTERM (a timeout, a CI runner) ends a run like
Ctrl-C, with exit code 130 and every process of its deployment stopped — they lead their own
sessions, so nothing else would stop them."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

DEPLOYMENT = 7  # Redis, two workers, the recorder, two schedulers, the gateway


def _children(pid: int) -> set[int]:
    out = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            out.add(int(entry.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _kill_all(pids: set[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _worker_ports(pids: set[int]) -> list[int]:
    """The ports of the deployment's simulated workers, from their command lines."""
    ports = []
    for pid in pids:
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
        except OSError:
            continue
        if "worker" in argv and "--port" in argv:
            ports.append(int(argv[argv.index("--port") + 1]))
    return ports


def _tokens_generated(port: int) -> float:
    try:
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2).text
    except httpx.HTTPError:
        return 0.0
    lines = [ln for ln in text.splitlines() if ln.startswith("vllm:generation_tokens_total{")]
    return sum(float(ln.rsplit(" ", 1)[1]) for ln in lines)


def _in_a_round(children: set[int], deadline: float) -> None:
    """Until the load runs: a worker has generated tokens (the first round is direct)."""
    while not any(_tokens_generated(p) > 0 for p in _worker_ports(children)):
        assert time.monotonic() < deadline, "no round started"
        time.sleep(0.2)


@pytest.mark.e2e
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux)")
@pytest.mark.parametrize("phase", ["start", "round"])
def test_sigterm_stops_the_deployment_and_exits_130(tmp_path: Path, phase: str) -> None:
    """In a round, the load generator's event loop is running: a KeyboardInterrupt raised in
    one of its callbacks was swallowed there and the run went on (CI saw it hang). At c=64
    the loop is mostly in callbacks: the old handler hung in 1 of 3 tries here."""
    argv = [sys.executable, "-m", "control_plane", "bench", "overhead", "--concurrency", "64"]
    argv += ["--requests", "1000000", "--rounds", "1", "--out", str(tmp_path / "out.json")]
    log = (tmp_path / "bench.log").open("wb")
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    children: set[int] = set()
    try:
        deadline = time.monotonic() + 90
        while len(children := _children(proc.pid)) < DEPLOYMENT:
            assert proc.poll() is None, (tmp_path / "bench.log").read_text()
            assert time.monotonic() < deadline, f"only {len(children)} processes started"
            time.sleep(0.2)
        if phase == "start":
            time.sleep(1)  # the deployment is starting
        else:
            _in_a_round(children, deadline)
        children = _children(proc.pid)
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            raise AssertionError((tmp_path / "bench.log").read_text()) from None
        assert code == 130, (tmp_path / "bench.log").read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
            _kill_all(children)  # the test failed: leave nothing of its deployment running
    deadline = time.monotonic() + 10
    while (left := [p for p in children if _alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert left == []
    assert not (tmp_path / "out.json").exists()
    assert "interrupted" in (tmp_path / "bench.log").read_text()
