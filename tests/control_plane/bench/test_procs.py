"""Finding a deployment's processes: roles from command lines, pids from up.json and /proc."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time

from control_plane.bench import procs
from control_plane.up.tether import tethered


def test_roles_from_command_lines() -> None:
    py = [sys.executable, "-m", "control_plane"]
    assert procs.role_of(["/usr/bin/redis-server", "*:6379"]) == "redis"
    assert procs.role_of(["/usr/bin/redis-server unixsocket:/tmp/x/r.sock"]) == "redis"
    assert procs.role_of([*py, "gateway", "--port", "1"]) == "gateway"
    assert procs.role_of([*py, "scheduler"]) == "scheduler"
    assert procs.role_of([*py, "worker", "sim", "--port", "2"]) == "worker"
    assert procs.role_of(["/venv/bin/arbiter", "recorder"]) == "recorder"
    assert procs.role_of([sys.executable, "-m", "streamlit", "run", "app.py"]) == "console"
    assert procs.role_of([*py, "up"]) is None
    assert procs.role_of(["bash"]) is None


def test_up_json_children_with_a_live_pid_are_found() -> None:
    argv = [sys.executable, "-c", "import time; time.sleep(30)", "control_plane", "gateway"]
    child = subprocess.Popen(argv)
    try:
        deadline = time.monotonic() + 10  # until the child has exec'd (its argv is in /proc)
        while procs.cmdline(child.pid) != argv and time.monotonic() < deadline:
            time.sleep(0.01)
        info = {
            "children": {
                "gateway": {"pid": child.pid, "restarts": 0},
                "recorder": {"pid": None, "restarts": 1},
            }
        }
        assert procs.from_up_json(info) == [procs.Proc("gateway", "gateway", child.pid)]
        assert child.pid in procs.descendants(os.getpid())  # the session's redis-server too
        assert procs.name_procs([child.pid]) == [procs.Proc("gateway", "gateway", child.pid)]
        assert (procs.rss_kb(child.pid) or 0) > 0
    finally:
        child.kill()
        child.wait()
    assert not procs.alive(child.pid)
    assert procs.rss_kb(child.pid) is None


def test_a_child_under_arbiter_up_s_tether_is_found_as_its_command() -> None:
    """`up.json` names the tether (`control_plane.up.tether`) for Redis and the console; a
    fault must reach redis-server itself (SIGSTOP to the tether would not pause Redis).
    Regression: Redis was not found at all, and `bench faults` failed on redis-kill/-pause."""
    server = shutil.which("redis-server")
    assert server is not None  # the suite's own Redis needs it
    work = tempfile.mkdtemp()
    argv = [server, "--port", "0", "--unixsocket", f"{work}/r.sock", "--save", "", "--dir", work]
    tether = subprocess.Popen(tethered(argv), stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not (found := procs.from_up_json({"children": {"redis": {"pid": tether.pid}}})):
            assert time.monotonic() < deadline, procs.descendants(tether.pid)
            time.sleep(0.05)
        (redis,) = found
        assert redis.role == "redis" and redis.pid != tether.pid
        assert redis.pid in procs.descendants(tether.pid)
    finally:
        tether.kill()  # its command gets the parent-death SIGKILL
        tether.wait()
