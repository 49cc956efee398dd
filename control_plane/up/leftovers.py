"""What one `arbiter up` leaves for the next in its state directory: a lock and its children.

Rules and guarantees:

- One `arbiter up` per state directory. It holds an exclusive `flock` on `<state-dir>/up.lock`
  for its whole life; the kernel drops the lock when the process ends, however it ends (kill -9,
  OOM), so a second `up` is refused while the first lives and never after it died. Children do
  not inherit the lock (`Popen` closes inherited descriptors).
- `<state-dir>/children.json` (0600) names the `up` that wrote it and every child started, each
  by pid and by the process's start time, rewritten at every start, restart and stop.
- An `up` that takes the lock first stops every process that file names which is still the same
  process (same pid and same start time): the children of an `up` that died without stopping
  them, still holding the Redis AOF, the ports and the worker slots. Its whole process group is
  sent SIGTERM, then SIGKILL after a grace (the child's own when longer); every signal is sent
  only after checking again that the pid is still that process, so a pid reused by another
  process is never touched. Children whose writer still runs (a state directory copied from a
  live deployment) are left alone. One that survives SIGKILL stops the new `up`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, Any

from control_plane.up.children import Child
from control_plane.up.errors import UpError
from control_plane.up.state_files import read_json, write_private_json

LOCK_FILE = "up.lock"
CHILDREN_FILE = "children.json"
DEFAULT_GRACE_S = 10.0
"""SIGTERM to SIGKILL for a leftover, as `arbiter up` stops its own children (more for one
recorded with a longer grace: a vLLM worker)."""
KILL_WAIT_S = 5.0
DEAD_HOLDER_WAIT_S = 2.0
"""How long `StateLock.take` waits for a lock whose recorded holder is gone."""


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
        deadline = time.monotonic() + DEAD_HOLDER_WAIT_S
        while not _locked(handle):
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            # the children of a dead `up` take the freed lock in turn, each for an instant
            # (`up/tether.py`): a holder that is gone is waited for, briefly
            if _alive(holder):
                handle.close()
                raise StateDirBusy(
                    f"another `arbiter up` (pid {holder}) is running with state directory "
                    f"{state_dir}; stop it first (Ctrl-C, or kill -TERM {holder})"
                )
            if time.monotonic() > deadline:  # held on, not by the process the file names
                handle.close()
                raise StateDirBusy(
                    f"another process holds {state_dir / LOCK_FILE} (the pid written in it, "
                    f"{holder}, has exited: an `arbiter up` that has not written its own yet, "
                    f"or a child of a dead one still stopping); try again, or find it with "
                    f"`fuser {state_dir / LOCK_FILE}`"
                )
            time.sleep(0.02)
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        return cls(handle)

    def release(self) -> None:
        if self._handle is not None:
            self._handle.close()  # closing the last descriptor drops the flock
            self._handle = None


def _locked(handle: IO[str]) -> bool:
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _alive(holder: str) -> bool:
    """Whether the pid `up.lock` names still runs (an unreadable one counts as running)."""
    return not holder.isdigit() or process_started(int(holder)) is not None


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


def record_children(state_dir: Path, children: Iterable[Child]) -> None:
    """Rewrite `children.json`: this `up` (its owner) and its live children, each by pid and
    start time, with its stop grace."""
    entries: dict[str, dict[str, object]] = {}
    for child in children:
        pid = child.pid()
        started = None if pid is None else process_started(pid)
        if pid is not None and started is not None:
            entries[child.name] = {"pid": pid, "started": started, "grace_s": child.grace_s}
    owner = {"pid": os.getpid(), "started": process_started(os.getpid())}
    write_private_json(state_dir / CHILDREN_FILE, {"owner": owner, "children": entries})


class LeftoversRemain(RuntimeError):
    """Processes an earlier `up` left are still there after SIGKILL."""


def stop_leftovers(
    state_dir: Path, say: Callable[[str], None], grace_s: float = DEFAULT_GRACE_S
) -> list[int]:
    """Stop what an earlier `up` of `state_dir` left running (see the module rule); their pids.

    Call it only while holding the `StateLock`. Children whose owner still runs (a state
    directory copied from a live deployment's) are left alone. `LeftoversRemain` when one
    survives SIGKILL (uninterruptible I/O): starting beside it would share its ports and AOF.
    """
    recorded = read_json(state_dir / CHILDREN_FILE)
    if _same_process(recorded.get("owner")):
        say(f"{state_dir / CHILDREN_FILE} names the children of a live `arbiter up`: left alone")
        return []
    children = recorded.get("children")
    left = {
        name: entry
        for name, entry in (children.items() if isinstance(children, dict) else ())
        if _same_process(entry)
    }
    if not left:
        return []
    names = ", ".join(f"{name} (pid {entry['pid']})" for name, entry in left.items())
    say(f"an earlier `arbiter up` of {state_dir} left {names} running: stopping them")
    entries = list(left.values())
    graces = [float(e.get("grace_s") or 0.0) for e in entries]
    _signal_groups(entries, signal.SIGTERM)
    _wait_gone(entries, max([grace_s, *graces]))
    _signal_groups(entries, signal.SIGKILL)
    if _wait_gone(entries, KILL_WAIT_S):
        raise LeftoversRemain(f"could not stop what an earlier `arbiter up` left: {names}")
    return [int(e["pid"]) for e in entries]


def _same_process(entry: object) -> bool:
    """Whether a recorded {pid, started} is still that very process (and not this one)."""
    if not isinstance(entry, dict):
        return False
    pid, started = entry.get("pid"), entry.get("started")
    if not isinstance(pid, int) or pid <= 1 or pid == os.getpid() or started is None:
        return False
    return bool(process_started(pid) == started)


def _wait_gone(entries: list[dict[str, Any]], timeout_s: float) -> list[dict[str, Any]]:
    """Wait until none of `entries` is still its process, at most `timeout_s`; who is left."""
    deadline = time.monotonic() + timeout_s
    while (left := [e for e in entries if _same_process(e)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def _signal_groups(entries: list[dict[str, Any]], sig: signal.Signals) -> None:
    """Each child leads its own process group (started in a new session): signal the group, so
    what it started in that group goes too. Only entries still their process are signalled."""
    for entry in entries:
        if _same_process(entry):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(int(entry["pid"]), sig)


def take_state_dir(state_dir: Path, say: Callable[[str], None]) -> StateLock:
    """Lock `state_dir` for this `up` and stop what a dead one left there; `UpError` naming
    why not. Interrupted, it lets the directory go with `children.json` still naming what is
    left, for the next `up`."""
    try:
        lock = StateLock.take(state_dir)
    except StateDirBusy as exc:
        raise UpError(str(exc)) from None
    try:
        stop_leftovers(state_dir, say)
    except LeftoversRemain as exc:
        lock.release()
        raise UpError(str(exc)) from None
    except BaseException:
        lock.release()
        raise
    return lock
