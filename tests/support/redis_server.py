"""A private `redis-server` for the test session (never the machine's shared one)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field

import redis

from tests.support.ports import free_port


@dataclass
class RedisServer:
    """A redis-server child process on a free port; `stop`/`start` simulate outages."""

    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    workdir: str = field(default_factory=lambda: tempfile.mkdtemp(prefix="arb-redis-"))
    env: dict[str, str] | None = None
    """The server's environment (None: this process's)."""
    args: list[str] = field(default_factory=list)
    """More `redis-server` arguments (e.g. `--unixsocket PATH`)."""

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        exe = shutil.which("redis-server")
        if exe is None:
            raise RuntimeError("redis-server is not on PATH (apt-get install redis-server)")
        self.proc = subprocess.Popen(
            [
                exe,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                self.workdir,
                *self.args,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=self.env,
        )
        client = redis.Redis.from_url(self.url)
        deadline = time.monotonic() + 10
        while True:
            try:
                pid = int(client.info("server")["process_id"])
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        client.close()
        if pid != self.proc.pid:  # the port was taken before our server could bind it
            self.stop()
            raise RuntimeError(f"port {self.port} is held by another Redis (pid {pid})")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
            self.proc = None

    def flush(self) -> None:
        client = redis.Redis.from_url(self.url)
        client.flushall()
        client.close()
