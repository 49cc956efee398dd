"""Keep the children of `arbiter up` running: restart any that exits, with exponential backoff.

Only `Supervisor.stop()` ends supervision; a child that exits before then is restarted (same
argv, environment and ports), and every exit is reported with its reason and the delay.
"""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from control_plane.up.children import Child
from control_plane.up.log_rotation import LogLimit, rotate_if_over

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
"""Signals on which a supervising process stops its children as on Ctrl-C: SIGTERM (`kill`,
`docker stop`) and SIGHUP (its terminal closed, an SSH session dropped). The children run in
sessions of their own, so no hang-up reaches them: left to the default action, the supervisor
would die alone and leave them running."""


def catch_stop_signals() -> list[signal.Signals]:
    """Make `STOP_SIGNALS` raise KeyboardInterrupt, as Ctrl-C does; the signals caught.

    A hang-up its parent told it to ignore (`nohup arbiter up &`) stays ignored: the operator
    asked for the deployment to outlive the terminal.
    """
    caught = []
    for sig in STOP_SIGNALS:
        if sig == signal.SIGHUP and signal.getsignal(sig) is signal.SIG_IGN:
            continue
        signal.signal(sig, signal.default_int_handler)
        caught.append(sig)
    return caught


@dataclass(frozen=True, slots=True)
class Backoff:
    """Restart delays: the n-th restart in a row waits `initial_s * factor**(n-1)`, never more
    than `cap_s`. A child that stayed up at least `reset_after_s` counts as healthy again, so its
    next restart waits `initial_s` once more."""

    initial_s: float = 0.5
    factor: float = 2.0
    cap_s: float = 30.0
    reset_after_s: float = 60.0

    def delay(self, streak: int) -> float:
        """Delay before the `streak`-th restart in a row (1 = the first)."""
        return float(min(self.cap_s, self.initial_s * self.factor ** max(0, streak - 1)))

    def next_streak(self, streak: int, uptime_s: float) -> int:
        """The restart streak after an exit following `uptime_s` seconds up."""
        return 1 if uptime_s >= self.reset_after_s else streak + 1


def exit_reason(returncode: int | None) -> str:
    """'exit code 3' or 'killed by SIGKILL' (Popen's negative return codes are signals)."""
    if returncode is None:
        return "still running"
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit code {returncode}"


@dataclass
class Watched:
    """What the supervisor knows of one child."""

    child: Child
    started_at: float
    restarts: int = 0
    streak: int = 0
    due: float | None = None
    last_exit: str | None = None

    def status(self) -> dict[str, Any]:
        return {
            "pid": self.child.pid(),
            "restarts": self.restarts,
            "last_exit": self.last_exit,
            "health_url": self.child.health_url,
            "log": None if self.child.log_path is None else str(self.child.log_path),
        }


class Supervisor:
    """Restarts children that exit until `stop()`; then stops them all in reverse order.

    Guarantees: no child is started once `stop()` has begun (restarts and shutdown take the same
    lock, and the monitor thread is joined before any child is stopped); a child waiting out its
    backoff when `stop()` is called is simply not restarted; a child that cannot be stopped is
    reported and does not keep the others running. With `logs`, each child's log file is kept
    under that limit (checked every `logs_every_s`).
    """

    def __init__(
        self,
        backoff: Backoff | None = None,
        *,
        say: Callable[[str], None] = print,
        on_change: Callable[[dict[str, dict[str, Any]]], None] | None = None,
        poll_s: float = 0.1,
        logs: LogLimit | None = None,
        logs_every_s: float = 5.0,
    ) -> None:
        self.backoff = backoff or Backoff()
        self._say = say
        self._on_change = on_change
        self._poll_s = poll_s
        self._logs = logs
        self._logs_every_s = logs_every_s
        self._watched: list[Watched] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def children(self) -> list[Child]:
        return [w.child for w in self._watched]

    def add(self, child: Child) -> None:
        """Watch a child that is already started (supervision begins with `start()`)."""
        with self._lock:
            self._watched.append(Watched(child, time.monotonic()))

    def start(self) -> None:
        """Begin watching in a background thread."""
        self._thread = threading.Thread(target=self._run, name="arbiter-up-supervisor", daemon=True)
        self._thread.start()

    def status(self) -> dict[str, dict[str, Any]]:
        """Per child: pid (None while down), restart count, last exit reason, health URL, log."""
        with self._lock:
            return self._status()

    def stop(self, grace_s: float = 10.0) -> None:
        """End supervision, then stop the children in reverse order of start."""
        self._stopping.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        with self._lock:
            for w in reversed(self._watched):
                self._stop_one(w.child, grace_s)

    def _stop_one(self, child: Child, grace_s: float) -> None:
        """Stop one child; one that cannot be stopped (still there after SIGKILL, not ours to
        signal) is reported and the others are stopped all the same."""
        try:
            child.stop(max(grace_s, child.grace_s or 0.0))
        except (OSError, subprocess.SubprocessError) as exc:
            self._say(f"{child.name} could not be stopped: {exc!r}")

    def _status(self) -> dict[str, dict[str, Any]]:
        return {w.child.name: w.status() for w in self._watched}

    def _run(self) -> None:
        logs_due = time.monotonic()
        while not self._stopping.wait(self._poll_s):
            now = time.monotonic()
            self.tick(now)
            if self._logs is not None and now >= logs_due:
                self.rotate_logs(self._logs)
                logs_due = now + self._logs_every_s

    def rotate_logs(self, limit: LogLimit) -> None:
        """Rotate each child's log that is over `limit` (`up/log_rotation.py`); a failure
        (a full disk) is reported and supervision goes on."""
        for child in self.children:
            if child.log_path is None:
                continue
            try:
                rotate_if_over(child.log_path, limit)
            except OSError as exc:
                self._say(f"could not rotate {child.log_path}: {exc}")

    def tick(self, now: float) -> None:
        """One pass: note exits, restart children whose backoff is over."""
        with self._lock:
            changed = [w for w in self._watched if self._check(w, now)]
            if changed and self._on_change is not None:
                try:
                    self._on_change(self._status())
                except OSError as exc:  # a full disk must not end supervision
                    self._say(f"could not publish the children's status: {exc}")

    def _check(self, w: Watched, now: float) -> bool:
        if self._stopping.is_set():  # checked per child: stop() may begin during this pass
            return False
        if w.due is None:
            if w.child.alive():
                return False
            self._exited(w, now)
            return True
        if now < w.due:
            return False
        self._restart(w, now)
        return True

    def _exited(self, w: Watched, now: float) -> None:
        proc = w.child.proc
        pid = proc.pid if proc is not None else None
        w.last_exit = exit_reason(proc.returncode if proc is not None else None)
        w.streak = self.backoff.next_streak(w.streak, now - w.started_at)
        delay = self.backoff.delay(w.streak)
        w.due = now + delay
        self._say(f"{w.child.name} (pid {pid}) exited: {w.last_exit}; restarting in {delay:g}s")

    def _restart(self, w: Watched, now: float) -> None:
        w.child.kill_leftovers()
        w.due = None
        w.started_at = now
        w.restarts += 1
        try:
            w.child.start()
        except OSError as exc:
            w.last_exit = f"could not start: {exc}"
            self._say(f"{w.child.name} could not be restarted: {exc}")
            return
        pid = w.child.proc.pid if w.child.proc is not None else None
        self._say(f"{w.child.name} restarted (pid {pid}, restart {w.restarts})")
