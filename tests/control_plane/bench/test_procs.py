"""Finding a deployment's processes: roles from command lines, pids from up.json and /proc."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from control_plane.bench import procs


def test_roles_from_command_lines() -> None:
    py = [sys.executable, "-m", "control_plane"]
    assert procs.role_of(["/usr/bin/redis-server", "*:6379"]) == "redis"
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
