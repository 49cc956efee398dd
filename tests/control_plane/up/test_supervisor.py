"""The supervisor of `arbiter up`, with real short-lived processes: an exited child is restarted
after a growing delay (capped, reset once it stayed up), the reason is reported, and nothing is
restarted once shutdown has begun, not even a child waiting out its backoff."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from control_plane.up.children import Child
from control_plane.up.supervisor import Backoff, Supervisor, exit_reason

# Appends its pid to argv[1] at each start; then sleeps argv[2] seconds and exits with argv[3].
# On SIGTERM it appends "term <name>" to argv[4] (when given) and exits 0.
SCRIPT = """
import os, signal, sys, time
open(sys.argv[1], "a").write(f"{os.getpid()}\\n")
def term(*_):
    if len(sys.argv) > 4:
        open(sys.argv[4], "a").write(f"term {os.path.basename(sys.argv[1])}\\n")
    sys.exit(0)
signal.signal(signal.SIGTERM, term)
time.sleep(float(sys.argv[2]))
sys.exit(int(sys.argv[3]))
"""


def child(tmp: Path, name: str, sleep_s: float, code: int = 0, terms: Path | None = None) -> Child:
    argv = [sys.executable, "-c", SCRIPT, str(tmp / name), str(sleep_s), str(code)]
    if terms is not None:
        argv.append(str(terms))
    return Child(name, argv, tmp / f"{name}.log")


def starts(tmp: Path, name: str) -> list[int]:
    """Pids of every start of `name` so far (each start writes its pid first)."""
    try:
        return [int(line) for line in (tmp / name).read_text().split()]
    except FileNotFoundError:
        return []


def wait_for(what: str, check: Callable[[], bool], timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


class Run:
    """A supervisor under test, with what it said and each status it published."""

    def __init__(self, backoff: Backoff) -> None:
        self.lines: list[str] = []
        self.statuses: list[dict[str, dict[str, Any]]] = []
        self.sup = Supervisor(
            backoff, say=self.lines.append, on_change=self.statuses.append, poll_s=0.02
        )

    def add(self, *children: Child) -> None:
        for c in children:
            self.sup.add(c)
            c.start()

    def said(self, text: str) -> list[str]:
        return [line for line in self.lines if text in line]


@pytest.fixture
def run() -> Iterator[Callable[[Backoff], Run]]:
    runs: list[Run] = []

    def make(backoff: Backoff) -> Run:
        runs.append(Run(backoff))
        return runs[-1]

    yield make
    for r in runs:
        r.sup.stop(grace_s=2.0)


def test_backoff_grows_to_the_cap_and_resets_after_a_good_run() -> None:
    b = Backoff(initial_s=0.5, factor=2.0, cap_s=3.0, reset_after_s=60.0)
    assert [b.delay(n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert b.next_streak(3, uptime_s=59.9) == 4
    assert b.next_streak(3, uptime_s=60.0) == 1


def test_exit_reason_names_the_code_or_the_signal() -> None:
    assert exit_reason(3) == "exit code 3"
    assert exit_reason(-signal.SIGKILL) == "killed by SIGKILL"
    assert exit_reason(None) == "still running"


def test_a_crashing_child_is_restarted_with_growing_delays_and_the_reason(
    tmp_path: Path, run: Callable[[Backoff], Run]
) -> None:
    r = run(Backoff(initial_s=0.1, factor=2.0, cap_s=0.4, reset_after_s=60.0))
    r.add(child(tmp_path, "crasher", 0.0, code=3))
    r.sup.start()
    wait_for("4 restarts", lambda: len(starts(tmp_path, "crasher")) >= 5)
    delays = [line.rsplit("restarting in ", 1)[1] for line in r.said("exited")][:4]
    assert delays == ["0.1s", "0.2s", "0.4s", "0.4s"]
    assert r.said("crasher (pid ")[0].endswith("exited: exit code 3; restarting in 0.1s")
    last = r.statuses[-1]["crasher"]
    assert last["restarts"] >= 4 and last["last_exit"] == "exit code 3"


def test_a_killed_child_is_restarted_with_the_same_command_and_its_new_pid_published(
    tmp_path: Path, run: Callable[[Backoff], Run]
) -> None:
    r = run(Backoff(initial_s=0.05))
    r.add(child(tmp_path, "server", 60.0))
    r.sup.start()
    wait_for("first start", lambda: len(starts(tmp_path, "server")) == 1)
    first = starts(tmp_path, "server")[0]
    os.kill(first, signal.SIGKILL)
    wait_for("restart", lambda: len(starts(tmp_path, "server")) == 2)
    second = starts(tmp_path, "server")[1]
    assert second != first
    assert r.said(f"server (pid {first}) exited: killed by SIGKILL; restarting in 0.05s")
    wait_for("published pid", lambda: r.sup.status()["server"]["pid"] == second)
    assert r.statuses[-1]["server"] == {**r.sup.status()["server"], "pid": second}
    assert r.statuses[-1]["server"]["restarts"] == 1


def test_the_delay_resets_once_a_child_stayed_up_long_enough(
    tmp_path: Path, run: Callable[[Backoff], Run]
) -> None:
    r = run(Backoff(initial_s=0.05, factor=10.0, cap_s=5.0, reset_after_s=0.2))
    r.add(child(tmp_path, "flaky", 0.3, code=1))
    r.sup.start()
    wait_for("3 exits", lambda: len(r.said("exited")) >= 3)
    assert all(line.endswith("restarting in 0.05s") for line in r.said("exited"))


def test_stop_during_backoff_restarts_nothing(
    tmp_path: Path, run: Callable[[Backoff], Run]
) -> None:
    r = run(Backoff(initial_s=30.0))
    r.add(child(tmp_path, "crasher", 0.0, code=2))
    r.sup.start()
    wait_for("the exit", lambda: bool(r.said("exited")))
    began = time.monotonic()
    r.sup.stop(grace_s=2.0)
    assert time.monotonic() - began < 2.0
    time.sleep(0.3)
    assert len(starts(tmp_path, "crasher")) == 1
    assert r.sup.status()["crasher"]["restarts"] == 0


def test_shutdown_stops_children_in_reverse_order_and_restarts_none(
    tmp_path: Path, run: Callable[[Backoff], Run]
) -> None:
    terms = tmp_path / "terms"
    r = run(Backoff(initial_s=0.0))
    names = ["redis", "worker", "gateway"]
    r.add(*(child(tmp_path, n, 60.0, terms=terms) for n in names))
    r.sup.start()
    wait_for("all started", lambda: all(starts(tmp_path, n) for n in names))
    r.sup.stop(grace_s=5.0)
    time.sleep(0.3)
    assert terms.read_text().split("\n")[:-1] == [f"term {n}" for n in reversed(names)]
    assert all(len(starts(tmp_path, n)) == 1 for n in names)
    assert not r.said("exited") and not r.said("restarted")
    assert all(s["pid"] is None and s["restarts"] == 0 for s in r.sup.status().values())


class Unkillable(Child):
    """A child whose process outlives SIGKILL (uninterruptible I/O): `stop` raises as
    `Child.stop` then does, after its last wait."""

    def stop(self, grace_s: float = 10.0) -> None:
        raise subprocess.TimeoutExpired(self.argv, 5)


def test_a_child_that_cannot_be_stopped_does_not_keep_the_others_running(
    tmp_path: Path, run: Callable[[Backoff], Run]
) -> None:
    terms = tmp_path / "terms"
    r = run(Backoff(initial_s=0.0))
    stuck = Unkillable("stuck", child(tmp_path, "stuck", 60.0).argv, tmp_path / "stuck.log")
    r.add(child(tmp_path, "redis", 60.0, terms=terms), stuck, child(tmp_path, "worker", 60.0))
    r.sup.start()
    wait_for("all started", lambda: all(starts(tmp_path, n) for n in ("redis", "stuck", "worker")))
    try:
        r.sup.stop(grace_s=5.0)
        assert terms.read_text() == "term redis\n"  # stopped after the stuck one, in order
        assert r.said("stuck could not be stopped: TimeoutExpired")
    finally:
        Child.stop(stuck, 2.0)


@pytest.mark.parametrize(("ignored", "caught"), [(False, "SIGTERM SIGHUP"), (True, "SIGTERM")])
def test_a_hang_up_stops_the_supervisor_unless_its_parent_ignored_it(
    ignored: bool, caught: str
) -> None:
    """`arbiter up` under `nohup` must outlive the terminal; otherwise a hang-up stops it (and
    so its children) like Ctrl-C."""
    code = (
        "import signal\n"
        f"if {ignored}: signal.signal(signal.SIGHUP, signal.SIG_IGN)\n"
        "from control_plane.up.supervisor import catch_stop_signals\n"
        "print(' '.join(s.name for s in catch_stop_signals()))\n"
        "print(signal.getsignal(signal.SIGHUP) is signal.default_int_handler)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout.split("\n")
    assert out[0] == caught
    assert out[1] == str(not ignored)
