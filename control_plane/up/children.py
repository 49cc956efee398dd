"""Child processes of `arbiter up`: start, wait until healthy, stop cleanly in reverse order."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import httpx

from control_plane.up.tether import LOCK_ENV, tethered

ARBITER = [sys.executable, "-m", "control_plane"]
"""How `arbiter up` starts an `arbiter` command (this interpreter, this package)."""
# Secrets that a child inherits only when its own `env` names them (see `Child.environment`).
SECRET_ENV = ("ARBITER_ADMIN_TOKEN",)


class NotHealthy(RuntimeError):
    """A child exited while starting, or did not answer its health check in time (the message
    ends with its log's tail)."""


@dataclass
class Child:
    """One child process with its log file, in its own process group.

    Its environment is this process's, less `SECRET_ENV`, plus `env`: a secret reaches only the
    children whose `env` carries it. Without a log file (`log_path` None) it writes to this
    process's stdout and stderr (a container's log).
    """

    name: str
    argv: list[str]
    log_path: Path | None
    env: dict[str, str] = field(default_factory=dict)
    health_url: str | None = None
    proc: subprocess.Popen[bytes] | None = None
    grace_s: float | None = None
    """At least this long between SIGTERM and SIGKILL when it is stopped (a vLLM worker's
    wrapper needs its own stop timeout to stop vLLM, which runs in a group of its own)."""
    linger_s: float = 0.0
    """How long it keeps running once its `up` is gone (`tie_to`): Redis, while the other
    children drain through it."""
    health_id: str | None = None
    """When set, only a health answer whose JSON `gateway_id` starts with it is this child's:
    another deployment's gateway that took the port first would answer 200 as well."""
    _guard: threading.RLock = field(
        default_factory=threading.RLock, init=False, repr=False, compare=False
    )
    """Serialises noticing an exit, killing the group and reaping across threads (the
    supervisor's and the caller's), so the group is never signalled after another thread
    reaped the child."""

    def tie_to(self, lock: Path) -> None:
        """End when the `arbiter up` holding `lock` ends (`up/tether.py`): the lock's path in
        the environment and, for a command that is not an `arbiter` process, the tether as
        its parent."""
        self.env[LOCK_ENV] = str(lock.resolve())
        if self.argv[: len(ARBITER)] != ARBITER:
            self.argv = tethered(self.argv, self.linger_s)

    def start(self) -> None:
        if self.log_path is None:
            self.proc = self._popen(None, None)
            return
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self.proc = self._popen(log, subprocess.STDOUT)

    def _popen(self, out: IO[bytes] | None, err: int | None) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            self.argv,
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            env=self.environment(),
            start_new_session=True,
        )

    def environment(self) -> dict[str, str]:
        inherited = {k: v for k, v in os.environ.items() if k not in SECRET_ENV}
        return {**inherited, **self.env}

    def kill_leftovers(self) -> None:
        """SIGKILL what is left of an exited child's process group (what it started in its own
        group: vLLM's wrapper starts vLLM in a group of its own, which dies with the wrapper).

        Only while the exited child is not reaped yet: until then its pid, which is the
        group's id, cannot be given to another process, so the signal cannot reach a group
        that is not this child's. Every path here that notices the exit (`alive`, `pid`,
        `stop`) kills the rest of the group this way before it reaps. Where `os.waitid` is
        missing (macOS before Python 3.13) an exit is noticed by reaping, and the group is
        signalled just after, as it always was there."""
        with self._guard:
            proc = self.proc
            if proc is None:
                return
            if not _CAN_PEEK:
                if proc.poll() is not None:
                    _kill_group(proc.pid)
                return
            if proc.returncode is None and _leader(proc) == _EXITED:
                _kill_group(proc.pid)
                proc.poll()

    def alive(self) -> bool:
        """Whether it runs; once it exited, what is left of its group is killed (and it is
        reaped)."""
        with self._guard:
            proc = self.proc
            if proc is None or proc.returncode is not None:
                return False
            if _CAN_PEEK and _leader(proc) == _RUNNING:
                return True
            if not _CAN_PEEK and proc.poll() is None:
                return True
            self.kill_leftovers()
            proc.poll()  # reaped by another path meanwhile
            return False

    def pid(self) -> int | None:
        """The running process's pid; None while down."""
        return self.proc.pid if self.alive() and self.proc is not None else None

    def wait_healthy(self, timeout_s: float) -> None:
        """Block until `health_url` answers 200; `NotHealthy` with the log's tail if it never
        does."""
        if self.health_url is None:
            return
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.alive():
                raise NotHealthy(f"{self.name} exited early:\n{self.tail()}")
            try:
                if self._answered(httpx.get(self.health_url, timeout=1.0)):
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise NotHealthy(f"{self.name} not healthy after {timeout_s:.0f}s:\n{self.tail()}")

    def _answered(self, resp: httpx.Response) -> bool:
        if resp.status_code != 200:
            return False
        if self.health_id is None:
            return True
        try:
            gateway_id = resp.json().get("gateway_id")
        except (ValueError, AttributeError):
            return False
        return isinstance(gateway_id, str) and gateway_id.startswith(self.health_id)

    def stop(self, grace_s: float = 10.0) -> None:
        """SIGTERM the child's process group, then SIGKILL after `grace_s`; once the child
        itself exited, SIGKILL what is left of its group (before it is reaped).
        `subprocess.TimeoutExpired` when it is still there 5 s after SIGKILL."""
        with self._guard:
            proc = self.proc
            if proc is None or not self.alive():
                return
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            deadline = time.monotonic() + grace_s
            while self.alive():
                if time.monotonic() >= deadline:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=5)
                    return
                time.sleep(0.05)

    def tail(self, lines: int = 20) -> str:
        """The last `lines` of its log (of the rotated one too, when the log was just
        truncated: `up/log_rotation.py`)."""
        if self.log_path is None:
            return "(its output went to this process's output)"
        rotated = self.log_path.with_name(self.log_path.name + ".1")
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
            if len(text) < lines and rotated.exists():
                text = rotated.read_text(errors="replace").splitlines() + text
            return "\n".join(text[-lines:])
        except OSError:
            return "(no log)"


_RUNNING, _EXITED, _REAPED = "running", "exited", "reaped"
_CAN_PEEK = hasattr(os, "waitid")
"""Whether an exit can be seen without reaping (`os.waitid` with `WNOWAIT`)."""


def _leader(proc: subprocess.Popen[bytes]) -> str:
    """Whether a child runs, exited but is not reaped yet (its pid still held), or is reaped;
    only where `_CAN_PEEK`."""
    try:
        info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return _REAPED
    return _RUNNING if info is None else _EXITED


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
