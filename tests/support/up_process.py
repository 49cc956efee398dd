"""`arbiter up` as a subprocess for end-to-end tests: a whole supervised deployment on free
ports, and the means to hurt it (kill -9 one child, found by name in up.json).

Started as an operator starts it (`python -m control_plane up …`); ready once
`<state-dir>/up.json` lists every child and the gateway answers. `up.json` is rewritten by
`arbiter up` on every restart: `children[name]` holds `pid` (None while down), `restarts`,
`last_exit`, `health_url` and `log`. Stopped with SIGTERM (it stops its own children), and only
if that fails, by killing its process group.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import httpx

from tests.support.ports import free_port, wait_http


@dataclass
class UpProcess:
    """One `arbiter up --no-console` in `state_dir`; `start()` blocks until every part answers."""

    state_dir: Path
    workers: int = 2
    speed: float = 20.0
    extra_args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    """Added to the environment of `arbiter up` (its children inherit it)."""
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    _log: TextIO | None = None

    @property
    def log_path(self) -> Path:
        """Beside the state dir, which `arbiter up` creates itself (mode 0700)."""
        return self.state_dir.parent / f"{self.state_dir.name}.up.out"

    @property
    def db_url(self) -> str:
        return f"sqlite:///{self.state_dir / 'arbiter.db'}"

    @property
    def gateway_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def argv(self) -> list[str]:
        return [
            *(sys.executable, "-m", "control_plane", "up", "--no-console"),
            *("--port", str(self.port), "--workers", str(self.workers)),
            *("--state-dir", str(self.state_dir), "--speed", str(self.speed)),
            *("--database-url", self.db_url),
            *self.extra_args,
        ]

    def start(self, timeout_s: float = 120.0) -> dict[str, Any]:
        self.state_dir.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("w")
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200", **self.env}
        # its own process group, so that a stuck child can still be cleaned up in stop()
        self.proc = subprocess.Popen(
            self.argv(), stdout=self._log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        info = self._wait_up_json(timeout_s)
        wait_http(f"{self.gateway_url}/readyz", timeout=30)
        return info

    def info(self) -> dict[str, Any]:
        """up.json as it is now."""
        try:
            data = json.loads((self.state_dir / "up.json").read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def children(self) -> dict[str, dict[str, Any]]:
        return dict(self.info().get("children") or {})

    def _wait_up_json(self, timeout_s: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"arbiter up exited ({self.proc.returncode}):\n{self.output()}")
            data = self.info()
            if data.get("children") and data.get("up_pid") == self.proc.pid:  # not an earlier one's
                return data
            time.sleep(0.2)
        raise TimeoutError(f"arbiter up wrote no up.json in {timeout_s}s:\n{self.output()}")

    def kill9(self, name: str) -> int:
        """SIGKILL child `name` (its main process only, as a crash would); returns its pid."""
        pid = int(self.children()[name]["pid"])
        os.kill(pid, signal.SIGKILL)
        return pid

    def wait_restarted(self, name: str, old_pid: int, timeout_s: float = 60.0) -> int:
        """Block until `name` runs again under a new pid (and answers, if it has a health URL)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            child = self.children().get(name) or {}
            pid = child.get("pid")
            if pid and pid != old_pid:
                if child.get("health_url"):
                    wait_http(child["health_url"], timeout=max(1.0, deadline - time.monotonic()))
                return int(pid)
            time.sleep(0.1)
        raise TimeoutError(f"{name} was not restarted in {timeout_s}s:\n{self.output()}")

    def scheduler_leader(self, timeout_s: float = 30.0) -> str:
        """The name of the scheduler child that holds the lease now."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for name, child in self.children().items():
                if not name.startswith("scheduler") or not child.get("health_url"):
                    continue
                url = str(child["health_url"]).replace("/healthz", "/readyz")
                try:
                    if httpx.get(url, timeout=2.0).json().get("role") == "leader":
                        return name
                except (httpx.HTTPError, ValueError):
                    pass
            time.sleep(0.2)
        raise TimeoutError("no scheduler leads")

    def output(self, chars: int = 6000) -> str:
        """What `arbiter up` printed (banner, restart lines)."""
        try:
            return self.log_path.read_text()[-chars:]
        except OSError:
            return ""

    def child_log(self, name: str, chars: int = 6000) -> str:
        """The end of one child's log (`scheduler-0`, `recorder`, `gateway`…)."""
        try:
            return (self.state_dir / "logs" / f"{name}.log").read_text()[-chars:]
        except OSError as exc:
            return f"({name}'s log: {exc})"

    def stop(self, timeout_s: float = 60.0) -> int | None:
        """SIGTERM `arbiter up` and wait; its exit code (None if it had to be killed)."""
        code: int | None = None
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                code = self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        elif self.proc is not None:
            code = self.proc.returncode
        if self._log is not None:
            self._log.close()
            self._log = None
        return code
