"""Supervising one server process: start, wait for health, restart with backoff, stop gracefully."""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import IO

import httpx

log = logging.getLogger("arbiter.workers.vllm")

_PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


@dataclass(frozen=True)
class Backoff:
    """Exponential restart delays: `initial_s`, then ×`factor` per consecutive failure, capped.

    After `max_restarts` consecutive failures the supervisor gives up. A run that stayed healthy
    for `stable_after_s` seconds is a success: the next failure starts again at `initial_s`.
    """

    initial_s: float = 1.0
    factor: float = 2.0
    max_s: float = 60.0
    max_restarts: int = 10
    stable_after_s: float = 120.0

    def delay(self, failures: int) -> float:
        """Seconds to wait before the restart that follows the `failures`-th failure (≥ 1)."""
        return float(min(self.max_s, self.initial_s * self.factor ** max(0, failures - 1)))


@dataclass(frozen=True)
class RunOutcome:
    """Why one run of the child ended, and how long it had been healthy (0 if never)."""

    reason: str
    healthy_for_s: float


class VllmSupervisor:
    """Keeps one server process (a vLLM OpenAI server) running and healthy.

    Rule: `command` starts in a new process group (vLLM forks an engine core and workers, and
    all of them must go together). The child is ready when `health_url` answers 200; it is
    polled every `health_interval_s` afterwards. When the child exits, fails `unhealthy_after`
    consecutive health checks, or is not healthy within `startup_timeout_s`, its process group
    is stopped and it is started again after `backoff.delay(n)` for the n-th consecutive failure;
    past `backoff.max_restarts` the supervisor gives up and `run()` returns 1.

    Guarantees: `stop()` may be called from a signal handler or another thread and makes `run()`
    return 0 promptly; every stop sends SIGTERM to the child's whole process group, waits up to
    `stop_timeout_s`, then sends SIGKILL, so `run()` never returns with a child process left.
    With `die_with_parent` the child also gets SIGTERM if the thread that started it dies
    (Linux `PR_SET_PDEATHSIG`); use it only when `run()` runs in the main thread.
    """

    def __init__(
        self,
        command: Sequence[str],
        health_url: str,
        *,
        env: Mapping[str, str] | None = None,
        backoff: Backoff | None = None,
        startup_timeout_s: float = 300.0,
        health_interval_s: float = 2.0,
        unhealthy_after: int = 3,
        stop_timeout_s: float = 30.0,
        log_file: Path | None = None,
        die_with_parent: bool = False,
        on_ready: Callable[[float], None] | None = None,
    ) -> None:
        self.command = list(command)
        self.health_url = health_url
        self.env = dict(env) if env is not None else None
        self.backoff = backoff or Backoff()
        self.startup_timeout_s = startup_timeout_s
        self.health_interval_s = health_interval_s
        self.unhealthy_after = unhealthy_after
        self.stop_timeout_s = stop_timeout_s
        self.log_file = log_file
        self.die_with_parent = die_with_parent
        self.on_ready = on_ready
        self.starts = 0
        self.ready = threading.Event()
        self._stopping = False
        self._proc: subprocess.Popen[bytes] | None = None
        self._http: httpx.Client | None = None  # one client per run(): cheap health checks

    @property
    def pid(self) -> int | None:
        """Process id of the current child (its process group id too), or None."""
        return self._proc.pid if self._proc is not None else None

    def stop(self) -> None:
        """Ask `run()` to stop the child and return (async-signal-safe: it only sets a flag)."""
        self._stopping = True

    def install_signal_handlers(self) -> None:
        """Make SIGTERM and SIGINT call `stop()` (main thread only)."""

        def handler(signum: int, frame: FrameType | None) -> None:
            self.stop()

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)

    def run(self) -> int:
        """Supervise until `stop()` (returns 0) or too many consecutive failures (returns 1)."""
        with httpx.Client(timeout=5.0) as http:
            self._http = http
            try:
                return self._supervise()
            finally:
                self._http = None

    def _supervise(self) -> int:
        failures = 0
        while not self._stopping:
            outcome = self._run_once()
            if self._stopping:
                break
            if outcome.healthy_for_s >= self.backoff.stable_after_s:
                failures = 0
            failures += 1
            if failures > self.backoff.max_restarts:
                log.error("giving up after %d consecutive failures (%s)", failures, outcome.reason)
                return 1
            delay = self.backoff.delay(failures)
            log.warning("child %s; restart %d in %.1f s", outcome.reason, failures, delay)
            self._sleep(delay)
        return 0

    def _run_once(self) -> RunOutcome:
        self._spawn()
        try:
            return self._watch()
        finally:
            self._terminate()
            self.ready.clear()

    def _spawn(self) -> None:
        self.starts += 1
        out: IO[bytes] | None = None
        if self.log_file is not None:
            out = self.log_file.open("ab")
        try:
            self._proc = subprocess.Popen(
                self.command,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT if out is not None else None,
                start_new_session=True,
                preexec_fn=_die_with_parent if self.die_with_parent else None,
            )
        finally:
            if out is not None:
                out.close()
        log.info("started child pid %d (start %d): %s", self._proc.pid, self.starts, self.command)

    def _watch(self) -> RunOutcome:
        proc = self._proc
        assert proc is not None
        started = time.monotonic()
        healthy_since: float | None = None
        bad = 0
        while not self._stopping:
            code = proc.poll()
            now = time.monotonic()
            healthy_for = now - healthy_since if healthy_since is not None else 0.0
            if code is not None:
                return RunOutcome(f"exited with code {code}", healthy_for)
            ok = self._probe()
            if healthy_since is None:
                if ok:
                    healthy_since = now
                    self._announce_ready(now - started)
                elif now - started > self.startup_timeout_s:
                    return RunOutcome(f"not healthy after {self.startup_timeout_s:.0f} s", 0.0)
            else:
                bad = 0 if ok else bad + 1
                if bad >= self.unhealthy_after:
                    return RunOutcome(f"failed {bad} health checks", healthy_for)
            self._sleep(self.health_interval_s if healthy_since is not None else 0.25)
        return RunOutcome("stopped", 0.0)

    def _announce_ready(self, startup_s: float) -> None:
        log.info("healthy at %s after %.1f s", self.health_url, startup_s)
        self.ready.set()
        if self.on_ready is not None:
            self.on_ready(startup_s)

    def _probe(self) -> bool:
        try:
            assert self._http is not None
            return self._http.get(self.health_url).status_code == 200
        except httpx.HTTPError:
            return False

    def _terminate(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        pgid = proc.pid
        _signal_group(pgid, signal.SIGTERM)
        deadline = time.monotonic() + self.stop_timeout_s
        try:
            proc.wait(timeout=self.stop_timeout_s)
        except subprocess.TimeoutExpired:
            log.warning("child %d ignored SIGTERM for %.0f s: SIGKILL", pgid, self.stop_timeout_s)
        while _group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _group_alive(pgid):
            _signal_group(pgid, signal.SIGKILL)
        proc.wait()
        log.info("child %d stopped (code %s)", pgid, proc.returncode)

    def _sleep(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while not self._stopping and (left := end - time.monotonic()) > 0:
            time.sleep(min(0.05, left))


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _die_with_parent() -> None:
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
