"""`arbiter up` as a subprocess for the browser test: a whole deployment on free ports.

Started exactly as an operator starts it (`python -m control_plane up …`); ready once
`<state-dir>/up.json` exists and the gateway and the console answer; stopped with SIGTERM (it
stops its own children), and only if that fails, by killing its process group.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from tests.support.ports import free_port, wait_http


@dataclass(frozen=True, slots=True)
class UpInfo:
    """What `arbiter up` wrote to up.json: URLs, the admin token and the demo tenants' keys."""

    gateway_url: str
    console_url: str
    admin_token: str
    tenants: dict[str, str]


@dataclass
class UpProcess:
    """One `arbiter up` in `state_dir`; `start()` blocks until every part answers."""

    state_dir: Path
    speed: float = 5.0
    extra_args: tuple[str, ...] = ()
    """More `arbiter up` flags (policy, workers, batch size, tenants)."""
    env: dict[str, str] = field(default_factory=dict)
    """More environment for `arbiter up` and its children (settings as `ARBITER_*`)."""
    port: int = field(default_factory=free_port)
    console_port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    _log: TextIO | None = None

    @property
    def log_path(self) -> Path:
        return self.state_dir / "up.out"

    def argv(self) -> list[str]:
        return [
            *(sys.executable, "-m", "control_plane", "up"),
            *("--port", str(self.port), "--console-port", str(self.console_port)),
            *("--state-dir", str(self.state_dir), "--speed", str(self.speed)),
            *("--database-url", f"sqlite:///{self.state_dir / 'arbiter.db'}"),
            *self.extra_args,
        ]

    def start(self, timeout_s: float = 120.0) -> UpInfo:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("w")
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **self.env}
        # its own process group, so that a stuck child can still be cleaned up in stop()
        self.proc = subprocess.Popen(
            self.argv(), stdout=self._log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        info = self._wait_up_json(timeout_s)
        wait_http(f"{info.gateway_url}/readyz", timeout=30)
        wait_http(f"{info.console_url}/_stcore/health", timeout=60)
        return info

    def _wait_up_json(self, timeout_s: float) -> UpInfo:
        path = self.state_dir / "up.json"
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"arbiter up exited ({self.proc.returncode}):\n{self.tail()}")
            data = _read_json(path)
            if data.get("console_url"):
                return UpInfo(
                    gateway_url=str(data["gateway_url"]),
                    console_url=str(data["console_url"]),
                    admin_token=str(data["admin_token"]),
                    tenants={str(k): str(v) for k, v in data["tenants"].items()},
                )
            time.sleep(0.2)
        raise TimeoutError(f"arbiter up wrote no up.json in {timeout_s}s:\n{self.tail()}")

    def tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text()[-chars:]
        except OSError:
            return ""

    def stop(self, timeout_s: float = 30.0) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        if self._log is not None:
            self._log.close()

    def keep_logs(self, dest: Path) -> None:
        """Copy `arbiter up`'s output and every child's log to `dest` (test artifacts)."""
        dest.mkdir(parents=True, exist_ok=True)
        logs = [self.log_path, *sorted((self.state_dir / "logs").glob("*.log"))]
        for log in logs:
            if log.exists():
                shutil.copy(log, dest / log.name)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
