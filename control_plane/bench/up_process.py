"""`arbiter up` as a child process of a bench command, or an already running one to attach to.

The bench starts `arbiter up` exactly as an operator does (same CLI, own state directory and
SQLite file, free ports), waits until it has written a fresh `up.json` (written once every
child is healthy), and stops it with SIGTERM — then SIGKILLs, by pid, whatever of the
deployment is still alive, so a failed run leaves no process behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from control_plane.bench import procs


class UpFailed(RuntimeError):
    """`arbiter up` did not start (the message ends with its log's tail)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class UpConfig:
    """What to start: simulated workers, their speed and batch size, tenants, the console."""

    workers: int = 2
    speed: float = 0.1
    max_num_seqs: int | None = None
    tenants: tuple[str, ...] = ("acme", "globex", "probe")
    console: bool = False
    extra_args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)

    def argv(self, state_dir: Path) -> list[str]:
        argv = [
            *(sys.executable, "-m", "control_plane", "up"),
            *("--workers", str(self.workers), "--speed", str(self.speed)),
            *("--port", str(free_port()), "--state-dir", str(state_dir)),
            *("--database-url", f"sqlite:///{state_dir / 'arbiter.db'}"),
            "--console" if self.console else "--no-console",
            *("--console-port", str(free_port())),
        ]
        if self.max_num_seqs:
            argv += ["--max-num-seqs", str(self.max_num_seqs)]
        for tenant in self.tenants:
            argv += ["--tenant", tenant]
        return [*argv, *self.extra_args]


@dataclass
class UpProcess:
    """One deployment: `info` is its `up.json`; `proc` is None when attached, not started."""

    state_dir: Path
    info: dict[str, Any]
    proc: subprocess.Popen[bytes] | None = None

    @classmethod
    def start(cls, config: UpConfig, state_dir: Path, timeout_s: float = 180.0) -> UpProcess:
        state_dir.mkdir(parents=True, exist_ok=True)
        up_json = state_dir / "up.json"
        up_json.unlink(missing_ok=True)
        with (state_dir / "up.log").open("ab") as log:
            proc = subprocess.Popen(
                config.argv(state_dir),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, "PYTHONUNBUFFERED": "1", **config.env},
                start_new_session=True,
            )
        up = cls(state_dir, {}, proc)
        deadline = time.monotonic() + timeout_s
        while not up_json.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                up.stop()
                raise UpFailed(f"arbiter up did not start:\n{up.log_tail()}")
            time.sleep(0.2)
        time.sleep(0.2)  # written in one call; let it land
        up.info = json.loads(up_json.read_text())
        return up

    @classmethod
    def attach(cls, up_json: Path) -> UpProcess:
        return cls(up_json.parent, json.loads(up_json.read_text()))

    @property
    def gateway(self) -> str:
        return str(self.info["gateway_url"])

    def keys(self) -> dict[str, str]:
        return {str(k): str(v) for k, v in (self.info.get("tenants") or {}).items()}

    def reload(self) -> None:
        """Re-read `up.json` (a supervisor may rewrite it with restarted children's pids)."""
        with contextlib.suppress(OSError, ValueError):
            self.info = json.loads((self.state_dir / "up.json").read_text())

    def processes(self) -> list[procs.Proc]:
        self.reload()
        return procs.discover(self.info, self.proc.pid if self.proc else None)

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = (self.state_dir / "up.log").read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def alive(self) -> bool:
        return self.proc is None or self.proc.poll() is None

    def stop(self, grace_s: float = 40.0) -> None:
        """SIGTERM `arbiter up` (it stops its children), then SIGKILL what is left of it."""
        if self.proc is None:
            return
        self.reload()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        redis_url = str(self.info.get("redis_url") or "")
        # only processes still bound to this deployment's Redis: a pid seen earlier may since
        # belong to someone else's process
        for pid in procs.members(redis_url) if redis_url else []:
            if procs.role_of(procs.cmdline(pid)) is not None:
                procs.kill(pid, signal.SIGKILL)
