"""Children that end with their `arbiter up`, however it ends (kill -9, the OOM killer).

Rule: every child `arbiter up` starts is told the path of the state directory's lock
(`ARBITER_UP_LOCK`), which `up` holds for its whole life and the kernel releases when it dies.
An `arbiter` process given that path (`watch_up_lock`, called by the command line before any
command) waits for the lock in a thread of its own; the moment it gets it, `up` is gone, and
the process sends itself SIGTERM: it stops as on `docker stop`, draining what it serves. A
child that is not an `arbiter` process (redis-server, Streamlit) runs under this module as a
small parent (`python -m control_plane.up.tether -- <command>`) that does the same on its
behalf: SIGTERM to the command (`--linger` seconds later: Redis, which the others drain
through), SIGKILL after `GRACE_S`, and the command's exit status as its own; on Linux the
command also dies with it (a parent-death signal). The variable is removed from the process's
environment, so what it starts in turn (vLLM under its worker wrapper) is stopped by that
process, not by a watch of its own.

Guarantee: a child of an `up` that died stops within about its own shutdown time, instead of
living on until the next `up` of the directory stops it (which still stops whatever did not).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

LOCK_ENV = "ARBITER_UP_LOCK"
GRACE_S = 10.0
PR_SET_PDEATHSIG = 1
USAGE = "usage: python -m control_plane.up.tether [--linger S] -- <command> [args…]"
log = logging.getLogger(__name__)


def watch_up_lock(
    on_gone: Callable[[], None] | None = None, path: str | None = None
) -> threading.Thread | None:
    """Start watching the lock `path` (default: the one `ARBITER_UP_LOCK` names, the variable
    then removed) names, if any; `on_gone` runs once `up` is gone (default: SIGTERM to this
    process's main thread). → the thread."""
    path = path or os.environ.pop(LOCK_ENV, None)
    if not path:
        return None
    action = on_gone or _terminate_self
    thread = threading.Thread(
        target=_wait_then, args=(Path(path), action), name="arbiter-up-tether", daemon=True
    )
    thread.start()
    return thread


def _wait_then(path: Path, action: Callable[[], None]) -> None:
    import fcntl  # here: every `arbiter` command imports this module, on any platform

    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:  # no lock file: not `up`'s child after all (or its dir is gone)
        log.warning("not watching arbiter up's lock %s: %s", path, exc)
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # blocks while `up` lives; a separate open file
        fcntl.flock(fd, fcntl.LOCK_UN)  # at once: the next `up` may take it
    finally:
        os.close(fd)
    log.warning("arbiter up is gone (its lock %s is free): stopping", path)
    action()


def _terminate_self() -> None:
    # to the main thread: where the services' handlers run and a blocking call is interrupted
    main_id = threading.main_thread().ident
    if main_id is None:
        os.kill(os.getpid(), signal.SIGTERM)
    else:
        signal.pthread_kill(main_id, signal.SIGTERM)


def main(argv: list[str]) -> int:
    """`python -m control_plane.up.tether [--linger S] -- <command…>`: run the command, stop
    it `S` seconds (default 0) after `up` is gone; → its exit status (a signal that ended it
    ends this process too). Redis lingers, so that the other children can drain through it."""
    linger = 0.0
    if argv[:1] == ["--linger"] and len(argv) > 1:
        linger, argv = float(argv[1]), argv[2:]
    command = argv[1:] if argv[:1] == ["--"] else argv
    if not command:
        print(USAGE, file=sys.stderr)
        return 2
    lock = os.environ.pop(LOCK_ENV, None)  # before the command starts: it watches nothing
    # the supervisor signals the whole process group, this process with the command: the
    # command's own answer to the signal decides, so this one waits for it (set before the
    # command starts, so no signal finds the default action; the command's own reset at exec)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: None)
    child = subprocess.Popen(command, preexec_fn=_die_with_parent)  # single-threaded yet
    watch_up_lock(lambda: _stop(child, linger), path=lock)
    code = child.wait()
    if code < 0:
        with contextlib.suppress(OSError, ValueError):  # SIGKILL keeps its default anyway
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code


def _die_with_parent() -> None:
    """Linux: the command gets SIGKILL if this process dies first (SIGKILL too: `up` and its
    tether killed together must not leave a redis-server on the AOF). The tether's only
    thread forks it, so the parent-death signal belongs to a thread that lives as long."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _stop(child: subprocess.Popen[bytes], linger_s: float) -> None:
    if linger_s > 0:
        try:
            child.wait(linger_s)
            return
        except subprocess.TimeoutExpired:
            pass
    with contextlib.suppress(ProcessLookupError):
        child.terminate()
        try:
            child.wait(GRACE_S)
        except subprocess.TimeoutExpired:
            child.kill()


def tethered(argv: list[str], linger_s: float = 0.0) -> list[str]:
    """`argv` run under this module (for a child that is not an `arbiter` process)."""
    return [sys.executable, "-m", "control_plane.up.tether", "--linger", str(linger_s), "--", *argv]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
