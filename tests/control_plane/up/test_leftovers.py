"""One `arbiter up` per state directory, and what a dead one leaves behind, with real processes:
the lock refuses a second holder while the first lives and is free once it is killed -9; the
children an earlier `up` recorded are stopped by the next one, but a pid that now belongs to
another process is never touched."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from control_plane.up.children import Child
from control_plane.up.leftovers import (
    CHILDREN_FILE,
    LOCK_FILE,
    StateDirBusy,
    StateLock,
    process_started,
    record_children,
    stop_leftovers,
)
from control_plane.up.state_files import read_json, write_private_json

SLEEPER = [sys.executable, "-c", "import time; time.sleep(120)"]
HOLDER = """
import sys, time
from pathlib import Path
from control_plane.up.leftovers import StateLock
lock = StateLock.take(Path(sys.argv[1]))
print("locked", flush=True)
time.sleep(120)
"""


def test_a_second_up_is_refused_while_the_first_holds_the_directory(tmp_path: Path) -> None:
    lock = StateLock.take(tmp_path)
    with pytest.raises(StateDirBusy, match=rf"another `arbiter up` \(pid {os.getpid()}\)"):
        StateLock.take(tmp_path)
    lock.release()
    StateLock.take(tmp_path).release()


def test_an_up_killed_outright_leaves_the_directory_free(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(StateDirBusy, match=rf"pid {holder.pid}\b"):
            StateLock.take(tmp_path)
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
        StateLock.take(tmp_path).release()
    finally:
        holder.kill()
        holder.wait(10)


def _started(tmp_path: Path, name: str) -> Child:
    child = Child(name, SLEEPER, tmp_path / f"{name}.log")
    child.start()
    return child


def test_the_children_of_a_dead_up_are_stopped_by_the_next(tmp_path: Path) -> None:
    children = [_started(tmp_path, "redis"), _started(tmp_path, "gateway")]
    try:
        pids = {c.name: c.pid() for c in children}
        record_children(tmp_path, children)
        _forget_owner(tmp_path)  # as if the `up` that wrote it had died
        said: list[str] = []
        stopped = stop_leftovers(tmp_path, said.append, grace_s=5.0)
        assert sorted(stopped) == sorted(pid or 0 for pid in pids.values())
        for child in children:
            assert child.proc is not None
            assert child.proc.wait(10) == -signal.SIGTERM
        assert len(said) == 1 and "left redis (pid" in said[0] and "stopping them" in said[0]
        assert stop_leftovers(tmp_path, said.append) == []  # nothing left the second time
    finally:
        for child in children:
            child.stop(2.0)


def test_a_recorded_pid_that_is_another_process_now_is_left_alone(tmp_path: Path) -> None:
    stranger = _started(tmp_path, "stranger")
    try:
        pid = stranger.pid()
        assert pid is not None and process_started(pid) is not None
        # the pid recorded by an earlier `up`, since reused: its start time differs
        write_private_json(
            tmp_path / CHILDREN_FILE, {"children": {"worker-0": {"pid": pid, "started": "1"}}}
        )
        assert stop_leftovers(tmp_path, print, grace_s=1.0) == []
        time.sleep(0.2)
        assert stranger.alive()
    finally:
        stranger.stop(2.0)


def _forget_owner(state_dir: Path) -> None:
    data = read_json(state_dir / CHILDREN_FILE)
    data["owner"] = {"pid": 999_999_999, "started": "0"}
    write_private_json(state_dir / CHILDREN_FILE, data)


def test_the_children_of_a_live_up_are_left_alone(tmp_path: Path) -> None:
    """A state directory copied from a running deployment names that deployment's children:
    a new `up` of the copy must not stop them."""
    child, owner = _started(tmp_path, "gateway"), _started(tmp_path, "up")
    try:
        record_children(tmp_path, [child])
        data = read_json(tmp_path / CHILDREN_FILE)
        pid = owner.pid()
        assert pid is not None
        data["owner"] = {"pid": pid, "started": process_started(pid)}  # alive
        write_private_json(tmp_path / CHILDREN_FILE, data)
        said: list[str] = []
        assert stop_leftovers(tmp_path, said.append, grace_s=1.0) == []
        assert child.alive() and "live `arbiter up`: left alone" in said[0]
    finally:
        child.stop(2.0)
        owner.stop(2.0)


def test_a_leftover_that_ignores_sigterm_is_killed_after_its_grace(tmp_path: Path) -> None:
    argv = [
        sys.executable,
        "-c",
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)",
    ]
    stubborn = Child("worker-0", argv, tmp_path / "w.log", grace_s=0.5)
    stubborn.start()
    try:
        time.sleep(0.5)  # its handler is in place
        record_children(tmp_path, [stubborn])
        _forget_owner(tmp_path)
        pid = stubborn.pid()
        assert stop_leftovers(tmp_path, print, grace_s=0.2) == [pid]
        assert stubborn.proc is not None and stubborn.proc.wait(10) == -signal.SIGKILL
    finally:
        stubborn.stop(1.0)


def test_only_live_children_are_recorded(tmp_path: Path) -> None:
    child = _started(tmp_path, "worker-0")
    try:
        down = Child("worker-1", SLEEPER, tmp_path / "w1.log")  # never started
        record_children(tmp_path, [child, down])
        recorded = read_json(tmp_path / CHILDREN_FILE)
        assert list(recorded["children"]) == ["worker-0"]
        assert recorded["children"]["worker-0"]["pid"] == child.pid()
        assert recorded["owner"]["pid"] == os.getpid()
    finally:
        child.stop(2.0)
    assert child.proc is not None and process_started(child.proc.pid) is None


LOCK_HOLDER = """
import fcntl, sys, time
f = open(sys.argv[1], "r+")
fcntl.flock(f, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(float(sys.argv[2]))
"""


def _hold(path: Path, seconds: float) -> subprocess.Popen[str]:
    holder = subprocess.Popen(
        [sys.executable, "-c", LOCK_HOLDER, str(path), str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    return holder


def test_a_lock_a_dead_up_s_child_holds_for_an_instant_is_waited_for(tmp_path: Path) -> None:
    """Once `up` is dead its children take the freed lock in turn, each for an instant
    (`up/tether.py`): the next `up` waits for them instead of refusing in the name of the
    dead pid the lock file still holds."""
    (tmp_path / LOCK_FILE).write_text("999999999\n")  # no such process
    holder = _hold(tmp_path / LOCK_FILE, 0.5)
    StateLock.take(tmp_path).release()
    holder.wait(5)


def test_a_lock_whose_holder_lives_is_refused_at_once(tmp_path: Path) -> None:
    (tmp_path / LOCK_FILE).write_text("")
    holder = _hold(tmp_path / LOCK_FILE, 30)
    (tmp_path / LOCK_FILE).write_text(f"{holder.pid}\n")
    try:
        began = time.monotonic()
        with pytest.raises(StateDirBusy, match=f"pid {holder.pid}"):
            StateLock.take(tmp_path)
        assert time.monotonic() - began < 1.0
    finally:
        holder.kill()
        holder.wait()


def test_a_lock_held_on_in_a_dead_pid_s_name_names_no_pid(tmp_path: Path) -> None:
    """Regression: a live `up` that took the lock but had not written its pid yet, over a
    file naming a dead one, was refused "another `arbiter up` (pid <the dead one>) is
    running", and `kill -TERM <that pid>` was the advice."""
    (tmp_path / LOCK_FILE).write_text("999999999\n")  # no such process
    holder = _hold(tmp_path / LOCK_FILE, 30)
    try:
        with pytest.raises(StateDirBusy) as refused:
            StateLock.take(tmp_path)
        assert "999999999, has exited" in str(refused.value)
        assert "pid 999999999)" not in str(refused.value) and "kill" not in str(refused.value)
    finally:
        holder.kill()
        holder.wait()
