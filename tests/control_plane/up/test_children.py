"""`arbiter up`'s children: what an exited child left in its process group is killed while the
child is not reaped yet (its pid, the group's id, cannot belong to anyone else then), and
never once it was reaped (the number may be another process's group by then); a health check
with `health_id` is passed only by this child's own answer."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from control_plane.up import children
from control_plane.up.children import Child, NotHealthy
from control_plane.up.supervisor import Backoff, Supervisor

# Starts a grandchild in the child's process group (`sleep 60`, its pid written to argv[1]),
# then exits 3: the grandchild is what an exited child leaves behind.
LEAVES_ONE = """
import subprocess, sys
grandchild = subprocess.Popen(["sleep", "60"])
open(sys.argv[1], "w").write(str(grandchild.pid))
sys.exit(3)
"""


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return _state(pid) != "Z"


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return "?"


def _leftover(tmp_path: Path) -> int:
    pid_file = tmp_path / "grandchild"
    deadline = time.monotonic() + 10
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline, "the child did not start its grandchild"
        time.sleep(0.02)
    return int(pid_file.read_text())


@pytest.fixture(params=[True, False], ids=["waitid", "no-waitid"])
def peek(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """With `os.waitid` (Linux), and as where it is missing (macOS before Python 3.13)."""
    monkeypatch.setattr(children, "_CAN_PEEK", request.param)
    return bool(request.param)


def test_what_an_exited_child_left_is_killed_when_its_exit_is_noticed(
    tmp_path: Path, peek: bool
) -> None:
    """Regression: the leftovers were killed only at the restart, after the back-off (up to
    30 s), by the pid of a child reaped long before. Without `os.waitid` the exit is noticed
    by reaping and the group killed just after (a reviewer found it never killed there)."""
    said: list[str] = []
    sup = Supervisor(Backoff(initial_s=30.0), say=said.append, poll_s=0.02)
    c = Child("leaver", [sys.executable, "-c", LEAVES_ONE, str(tmp_path / "grandchild")], None)
    sup.add(c)
    c.start()
    grandchild = _leftover(tmp_path)
    sup.start()
    try:
        deadline = time.monotonic() + 10
        while not any("exited: exit code 3" in line for line in said):
            assert time.monotonic() < deadline, said
            time.sleep(0.02)
        deadline = time.monotonic() + 2  # well inside the 30 s back-off
        while _running(grandchild):
            assert time.monotonic() < deadline, "the leftover outlived its child's exit"
            time.sleep(0.02)
    finally:
        sup.stop(grace_s=2.0)
        if _running(grandchild):
            os.kill(grandchild, signal.SIGKILL)


def test_a_reaped_child_s_group_is_never_signalled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    c = Child("quick", [sys.executable, "-c", "pass"], tmp_path / "quick.log")
    c.start()
    assert c.proc is not None
    c.proc.wait(timeout=10)  # reaped elsewhere: its pid is free to be reused
    sent: list[tuple[int, int]] = []
    monkeypatch.setattr(children.os, "killpg", lambda pid, sig: sent.append((pid, sig)))
    c.kill_leftovers()
    c.stop()
    assert not c.alive() and c.pid() is None
    assert sent == []


def test_stop_ends_the_child_and_what_it_left_in_its_group(tmp_path: Path, peek: bool) -> None:
    """A child that exits on SIGTERM while a member of its group ignores it: once the child
    is gone, the rest of its group is killed at once, not left running."""
    script = (
        "import signal, subprocess, sys, time\n"
        "g = subprocess.Popen(['sh', '-c', 'trap \"\" TERM; sleep 60'])\n"
        "open(sys.argv[1], 'w').write(str(g.pid))\n"
        "time.sleep(60)\n"
    )
    c = Child("server", [sys.executable, "-c", script, str(tmp_path / "grandchild")], None)
    c.start()
    grandchild = _leftover(tmp_path)
    began = time.monotonic()
    c.stop(grace_s=5.0)
    assert time.monotonic() - began < 4.0  # the child ended on SIGTERM: no wait for the grace
    deadline = time.monotonic() + 2
    while _running(grandchild):
        if time.monotonic() > deadline:
            os.kill(grandchild, signal.SIGKILL)
            raise AssertionError("a member of the group that ignored SIGTERM was left running")
        time.sleep(0.02)
    assert c.proc is not None and c.proc.returncode == -signal.SIGTERM


class _Ready(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b'{"status": "ready", "gateway_id": "gw-other-1a2b3c4d"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def another_gateway() -> Iterator[int]:
    """Another deployment's gateway, ready, on a port of its own."""
    server = HTTPServer(("127.0.0.1", 0), _Ready)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_another_gateway_answering_on_the_port_is_not_this_child_s_health(
    tmp_path: Path, another_gateway: int
) -> None:
    """Regression: a 200 from whatever listened on the port passed a gateway's check, so a
    gateway that lost the port to another deployment's was reported healthy."""
    url = f"http://127.0.0.1:{another_gateway}/readyz"
    argv = [sys.executable, "-c", "import time; time.sleep(1.5); raise SystemExit(1)"]
    mine = Child("gateway", argv, tmp_path / "gw.log", health_url=url, health_id="gw-mine-")
    mine.start()
    with pytest.raises(NotHealthy, match="gateway exited early"):
        mine.wait_healthy(10.0)
    theirs = Child("gateway", ["sleep", "5"], None, health_url=url, health_id="gw-other-")
    theirs.start()
    try:
        theirs.wait_healthy(5.0)  # its own prefix: healthy
    finally:
        theirs.stop(grace_s=1.0)
