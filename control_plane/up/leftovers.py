"""What one `arbiter up` leaves for the next in its state directory: a lock and its children.

Rules and guarantees:

- One `arbiter up` per state directory. It holds an exclusive `flock` on `<state-dir>/up.lock`
  for its whole life; the kernel drops the lock when the process ends, however it ends (kill -9,
  OOM), so a second `up` is refused while the first lives and never after it died. Children do
  not inherit the lock (`Popen` closes inherited descriptors).
- `<state-dir>/children.json` (0600) names every child started, by pid and by the process's
  start time, rewritten at every start, restart and stop.
- An `up` that takes the lock first stops every process that file names which is still the same
  process (same pid and same start time): the children of an `up` that died without stopping
  them, still holding the Redis AOF, the ports and the worker slots. Its whole process group is
  sent SIGTERM, then SIGKILL after a grace. A pid reused by another process is never touched.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO

from control_plane.up.state_files import read_json, write_private_json

LOCK_FILE = "up.lock"
CHILDREN_FILE = "children.json"


class StateDirBusy(RuntimeError):
    """Another live `arbiter up` holds the state directory."""


class StateLock:
    """The exclusive lock of one `arbiter up` on its state directory (see the module rule)."""

    def __init__(self, handle: IO[str]) -> None:
        self._handle: IO[str] | None = handle

    @classmethod
    def take(cls, state_dir: Path) -> StateLock:
        """Lock `state_dir` for this process; `StateDirBusy` naming the holder when taken."""
        path = state_dir / LOCK_FILE
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        handle = os.fdopen(fd, "r+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = handle.read().strip() or "unknown"
            handle.close()
            raise StateDirBusy(
                f"another `arbiter up` (pid {holder}) is running with state directory "
                f"{state_dir}; stop it first (Ctrl-C, or kill -TERM {holder})"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        return cls(handle)

    def release(self) -> None:
        if self._handle is not None:
            self._handle.close()  # closing the last descriptor drops the flock
            self._handle = None


def process_started(pid: int) -> str | None:
    """When process `pid` started, as an opaque token; None when there is no such live process.

    Linux: the start time in clock ticks since boot (`/proc/<pid>/stat`, field 22; a zombie
    counts as gone). Elsewhere: `ps -o lstart=`.
    """
    if sys.platform.startswith("linux"):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return None
        return None if fields[0] == "Z" else fields[19]
    try:
        out = subprocess.run(
            ["ps", "-o", "lstart=", "-p", str(pid)], capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def record_children(state_dir: Path, pids: Mapping[str, int | None]) -> None:
    """Rewrite `children.json` with the live children's pids and start times."""
    entries = {}
    for name, pid in pids.items():
        started = None if pid is None else process_started(pid)
        if pid is not None and started is not None:
            entries[name] = {"pid": pid, "started": started}
    write_private_json(state_dir / CHILDREN_FILE, {"children": entries})


def stop_leftovers(state_dir: Path, say: Callable[[str], None], grace_s: float = 10.0) -> list[int]:
    """Stop what an earlier `up` of `state_dir` left running (see the module rule); their pids.

    Call it only while holding the `StateLock`: then no live `up` owns these processes.
    """
    recorded = read_json(state_dir / CHILDREN_FILE).get("children")
    left = _still_running(recorded if isinstance(recorded, dict) else {})
    if not left:
        return []
    names = ", ".join(f"{name} (pid {pid})" for name, pid in left.items())
    say(f"an earlier `arbiter up` of {state_dir} left {names} running: stopping them")
    pids = list(left.values())
    _signal_groups(pids, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while _alive(pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    if _alive(pids):
        _signal_groups(_alive(pids), signal.SIGKILL)
    return pids


def _still_running(recorded: Mapping[str, object]) -> dict[str, int]:
    left: dict[str, int] = {}
    for name, entry in recorded.items():
        if not isinstance(entry, dict):
            continue
        pid, started = entry.get("pid"), entry.get("started")
        if not isinstance(pid, int) or pid <= 1 or pid == os.getpid() or started is None:
            continue
        if process_started(pid) == started:
            left[name] = pid
    return left


def _alive(pids: list[int]) -> list[int]:
    return [pid for pid in pids if process_started(pid) is not None]


def _signal_groups(pids: list[int], sig: signal.Signals) -> None:
    """Each child leads its own process group (started in a new session): signal the group, so
    what it started (vLLM under its wrapper) goes too."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, sig)
