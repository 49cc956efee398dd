"""`arbiter recorder` as a real process: it runs, every one of its threads, at `recorder_nice`
above the nice value it was started with — and so does its session's autogroup where it leads
its own session, as under `arbiter up` —, waits for a database it cannot reach yet, and a
SIGTERM ends it cleanly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from storage.migrate import current_revision, history
from tests.support.ports import free_port, wait_http


def _nice_of_threads(pid: int) -> set[int]:
    """The nice value of every thread of `pid` (field 19 of /proc/PID/task/TID/stat)."""
    values = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        stat = (task / "stat").read_text()
        values.add(int(stat.rsplit(")", 1)[1].split()[16]))
    return values


def _autogroup_nice(pid: int) -> int | None:
    """The nice value of `pid`'s autogroup ("/autogroup-42 nice 0"); None without autogroups."""
    group = Path(f"/proc/{pid}/autogroup")
    text = group.read_text() if group.exists() else ""
    return int(text.split("nice")[1]) if "nice" in text else None  # empty: the root group


def _start(
    redis_url: str, tmp_path: Path, nice: str, own_session: bool
) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    env = {
        **os.environ,
        "ARBITER_REDIS_URL": redis_url,
        "ARBITER_DATABASE_URL": f"sqlite:///{tmp_path / 'rec.db'}",
        "ARBITER_CLUSTER": "nice",
        "ARBITER_RECORDER_METRICS_PORT": str(port),
        "ARBITER_RECORDER_NICE": nice,
    }
    log = (tmp_path / "recorder.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "control_plane", "recorder"],
        env=env,
        stdout=log,
        stderr=log,
        start_new_session=own_session,
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/metrics", timeout=60)
    except TimeoutError:
        proc.kill()
        proc.wait()
        raise AssertionError((tmp_path / "recorder.log").read_text()) from None
    return proc, port


def _stop(proc: subprocess.Popen[bytes]) -> int:
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()  # a failed test leaves no recorder behind
        proc.wait()
        raise


@pytest.mark.parametrize(("setting", "added"), [("7", 7), ("0", 0)])
def test_every_thread_and_its_own_session_run_at_the_configured_nice(
    redis_url: str, tmp_path: Path, setting: str, added: int
) -> None:
    base = os.getpriority(os.PRIO_PROCESS, 0)
    proc, _ = _start(redis_url, tmp_path, setting, own_session=True)
    try:
        threads = _nice_of_threads(proc.pid)
        group = _autogroup_nice(proc.pid)
    finally:
        code = _stop(proc)
    assert threads == {min(19, base + added)}
    assert group is None or group == added  # a new session's autogroup starts at 0
    assert code == 0


def test_a_shared_session_is_left_as_it_was(redis_url: str, tmp_path: Path) -> None:
    """Raising the autogroup of a session it does not lead would lower its neighbours too."""
    before = _autogroup_nice(os.getpid())
    proc, _ = _start(redis_url, tmp_path, "7", own_session=False)
    try:
        assert _autogroup_nice(proc.pid) == before
        assert _nice_of_threads(proc.pid) == {min(19, os.getpriority(os.PRIO_PROCESS, 0) + 7)}
    finally:
        assert _stop(proc) == 0
    assert _autogroup_nice(os.getpid()) == before


def test_it_waits_for_a_database_that_is_not_there_yet(redis_url: str, tmp_path: Path) -> None:
    """A database that cannot be reached at start (here: a SQLite file whose directory does
    not exist yet) is waited for with a warning, then migrated — not a crash and a restart
    loop (before: a traceback and exit 1)."""
    port = free_port()
    later = tmp_path / "later"
    env = {
        **os.environ,
        "ARBITER_REDIS_URL": redis_url,
        "ARBITER_DATABASE_URL": f"sqlite:///{later / 'rec.db'}",
        "ARBITER_CLUSTER": "wait",
        "ARBITER_RECORDER_METRICS_PORT": str(port),
    }
    log_path = tmp_path / "recorder.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "control_plane", "recorder"], env=env, stdout=log, stderr=log
        )
    try:
        deadline = time.monotonic() + 60
        while "database not migrated" not in log_path.read_text():
            assert proc.poll() is None, log_path.read_text()
            assert time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.2)
        later.mkdir()
        wait_http(f"http://127.0.0.1:{port}/metrics", timeout=60)
        assert current_revision(env["ARBITER_DATABASE_URL"]) == history()[-1]
    finally:
        code = _stop(proc)
    assert code == 0, log_path.read_text()
