"""`up/tether.py`: a child watches the lock its `arbiter up` holds and stops once it is free;
the tether runs a command that is not an `arbiter` process and stops it the same way, passing
on its exit status. The lock is held by a real process here, killed as `up` would be."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from control_plane.up.tether import LOCK_ENV, tethered, watch_up_lock

HOLDER = """
import fcntl, sys, time
f = open(sys.argv[1], "w")
fcntl.flock(f, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(600)
"""


@pytest.fixture
def held(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[str]]]:
    """A lock file and the process that holds it (as `arbiter up` holds `up.lock`)."""
    lock = tmp_path / "up.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(lock)], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    yield lock, holder
    holder.kill()
    holder.wait()


def test_the_watch_fires_once_the_holder_is_gone_and_not_before(
    held: tuple[Path, subprocess.Popen[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    lock, holder = held
    monkeypatch.setenv(LOCK_ENV, str(lock))
    gone = threading.Event()
    thread = watch_up_lock(gone.set)
    assert thread is not None and LOCK_ENV not in os.environ  # not passed on to grandchildren
    assert not gone.wait(1.0)
    holder.send_signal(signal.SIGKILL)  # as `up` killed by kill -9 or the OOM killer
    assert gone.wait(10.0)


def test_without_the_variable_nothing_is_watched(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(LOCK_ENV, raising=False)
    assert watch_up_lock(lambda: None) is None


def test_the_tether_stops_its_command_when_up_is_gone(
    held: tuple[Path, subprocess.Popen[str]],
) -> None:
    lock, holder = held
    env = {**os.environ, LOCK_ENV: str(lock)}
    tether = subprocess.Popen(tethered(["sleep", "600"]), env=env, start_new_session=True)
    try:
        time.sleep(1.0)
        assert tether.poll() is None
        holder.send_signal(signal.SIGKILL)
        code = tether.wait(15)
    finally:
        if tether.poll() is None:
            os.killpg(tether.pid, signal.SIGKILL)
    assert code == -signal.SIGTERM  # the command's own end, passed on
    assert subprocess.run(["pgrep", "-g", str(tether.pid)], capture_output=True).stdout == b""


@pytest.mark.parametrize(("script", "expected"), [("exit 3", 3), ("kill -9 $$", -9)])
def test_the_tether_passes_on_its_command_s_exit(script: str, expected: int) -> None:
    done = subprocess.run(tethered(["sh", "-c", script]), timeout=30)
    assert done.returncode == expected


def test_the_tether_waits_for_its_command_when_its_group_is_signalled(tmp_path: Path) -> None:
    """The supervisor signals the process group: the command decides how it ends (here it
    exits 0 on SIGTERM after writing a line), and the tether waits for it."""
    out = tmp_path / "out"
    script = f"trap 'echo stopped > {out}; exit 0' TERM; while :; do sleep 0.1; done"
    tether = subprocess.Popen(tethered(["sh", "-c", script]), start_new_session=True)
    time.sleep(1.0)
    os.killpg(tether.pid, signal.SIGTERM)
    assert tether.wait(15) == 0
    assert out.read_text().strip() == "stopped"


def test_a_lingering_command_outlives_up_by_its_linger(
    held: tuple[Path, subprocess.Popen[str]],
) -> None:
    """Redis lingers so that the other children can drain through it once `up` is gone."""
    lock, holder = held
    env = {**os.environ, LOCK_ENV: str(lock)}
    tether = subprocess.Popen(tethered(["sleep", "600"], 2.0), env=env, start_new_session=True)
    try:
        time.sleep(0.5)
        holder.send_signal(signal.SIGKILL)
        gone_at = time.monotonic()
        assert tether.wait(20) == -signal.SIGTERM
        assert time.monotonic() - gone_at >= 2.0
    finally:
        if tether.poll() is None:
            os.killpg(tether.pid, signal.SIGKILL)


def test_a_command_dies_with_its_tether(tmp_path: Path) -> None:
    """`up` and the tether killed together (pkill -9) must not leave the command running
    with nobody to stop it (Linux: the parent-death signal)."""
    if not sys.platform.startswith("linux"):
        pytest.skip("the parent-death signal is Linux's")
    pid_file = tmp_path / "pid"
    tether = subprocess.Popen(tethered(["sh", "-c", f"echo $$ > {pid_file}; exec sleep 600"]))
    deadline = time.monotonic() + 10
    while not pid_file.exists() or not pid_file.read_text().strip():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    command = int(pid_file.read_text())
    tether.kill()
    tether.wait(5)
    deadline = time.monotonic() + 10
    while Path(f"/proc/{command}").exists() and "Z" not in _state(command):
        assert time.monotonic() < deadline, "the command outlived its tether"
        time.sleep(0.05)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][:1]
    except OSError:
        return "Z"
