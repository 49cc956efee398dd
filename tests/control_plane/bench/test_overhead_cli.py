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


@pytest.mark.e2e
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux)")
def test_sigterm_stops_the_deployment_and_exits_130(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "control_plane", "bench", "overhead", "--concurrency", "1"]
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
        time.sleep(3)  # into the deployment's start or the first round
        children = _children(proc.pid)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 130, (tmp_path / "bench.log").read_text()
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
