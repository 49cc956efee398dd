"""A private replicated Redis for tests: a primary, a replica and three Sentinels, each a real
process on a free port in its own directory (`redis-sentinel`, or `redis-server --sentinel`)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import redis
from redis.sentinel import Sentinel

from tests.support.ports import free_port

SERVICE = "arbiter"


def sentinel_command() -> list[str] | None:
    """How to run a Sentinel here (Debian's `redis-sentinel`, or redis-server's sentinel mode)."""
    if exe := shutil.which("redis-sentinel"):
        return [exe]
    if exe := shutil.which("redis-server"):
        return [exe, "--sentinel"]
    return None


@dataclass
class _Proc:
    name: str
    port: int
    argv: list[str]
    log: Path
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                self.argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def kill9(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill9()


@dataclass
class SentinelGroup:
    """Primary + replica + 3 Sentinels (quorum 2, down after 1 s, fail-over timeout 5 s)."""

    workdir: Path
    down_after_ms: int = 1000
    failover_timeout_ms: int = 5000
    nodes: list[_Proc] = field(default_factory=list)
    sentinels: list[_Proc] = field(default_factory=list)

    @property
    def primary_url(self) -> str:
        return f"redis://127.0.0.1:{self.nodes[0].port}/0"

    @property
    def addresses(self) -> str:
        """`ARBITER_REDIS_SENTINELS` for this group."""
        return ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)

    def start(self) -> None:
        command = sentinel_command()
        server = shutil.which("redis-server")
        if command is None or server is None:
            raise RuntimeError("redis-server is not on PATH (apt-get install redis-sentinel)")
        primary = self._node(server, "primary", [])
        replica = self._node(server, "replica", ["--replicaof", "127.0.0.1", str(primary.port)])
        _wait_replicated(primary.port, replica.port)
        for i in range(3):
            self.sentinels.append(self._sentinel(command, i, primary.port))
        self._wait_sentinels_agree(primary.port)

    def _node(self, server: str, name: str, extra: list[str]) -> _Proc:
        port = free_port()
        folder = self.workdir / name
        folder.mkdir(parents=True, exist_ok=True)
        argv = [server, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(folder)]
        argv += ["--save", "", "--appendonly", "yes", "--appendfsync", "everysec", *extra]
        node = _Proc(name, port, argv, self.workdir / f"{name}.log")
        node.start()
        self.nodes.append(node)
        _wait_ping(port)
        return node

    def _sentinel(self, command: list[str], i: int, primary_port: int) -> _Proc:
        port = free_port()
        folder = self.workdir / f"sentinel-{i}"
        folder.mkdir(parents=True, exist_ok=True)
        conf = folder / "sentinel.conf"  # Sentinel rewrites its own file: one each
        conf.write_text(
            f"port {port}\nbind 127.0.0.1\ndir {folder}\n"
            f"sentinel monitor {SERVICE} 127.0.0.1 {primary_port} 2\n"
            f"sentinel down-after-milliseconds {SERVICE} {self.down_after_ms}\n"
            f"sentinel failover-timeout {SERVICE} {self.failover_timeout_ms}\n"
            f"sentinel parallel-syncs {SERVICE} 1\n"
        )
        argv = [command[0], str(conf), *command[1:]]
        proc = _Proc(f"sentinel-{i}", port, argv, self.workdir / f"sentinel-{i}.log")
        proc.start()
        _wait_ping(port)
        return proc

    def _wait_sentinels_agree(self, primary_port: int, timeout_s: float = 20) -> None:
        """Every Sentinel names the primary and knows the replica and the other two."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if all(self._ready(s.port, primary_port) for s in self.sentinels):
                return
            time.sleep(0.2)
        raise RuntimeError(f"sentinels did not agree on the primary; see {self.workdir}")

    @staticmethod
    def _ready(port: int, primary_port: int) -> bool:
        client = redis.Redis(port=port, decode_responses=True)
        try:
            state = client.sentinel_master(SERVICE)
        finally:
            client.close()
        return bool(
            int(state["port"]) == primary_port
            and state["num-slaves"] >= 1
            and state["num-other-sentinels"] >= 2
        )

    def current_primary(self) -> int | None:
        """Port of the primary the Sentinels name now (None if none answers)."""
        manager = Sentinel([("127.0.0.1", s.port) for s in self.sentinels], socket_timeout=1.0)
        try:
            return int(manager.discover_master(SERVICE)[1])
        except redis.RedisError:
            return None

    def client(self) -> redis.Redis:
        """A client of the current primary (follows fail-overs)."""
        manager = Sentinel([("127.0.0.1", s.port) for s in self.sentinels], socket_timeout=1.0)
        return manager.master_for(SERVICE, socket_timeout=2.0, decode_responses=True)

    def kill9_primary(self) -> int:
        """SIGKILL the node that is primary now; returns its port."""
        port = self.current_primary()
        victim = next(n for n in self.nodes if n.port == port)
        victim.kill9()
        return victim.port

    def wait_failover(self, old_port: int, timeout_s: float = 30) -> int:
        """Port of the promoted replica once the Sentinels name it and it accepts writes."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            port = self.current_primary()
            if port is not None and port != old_port and _is_primary(port):
                return port
            time.sleep(0.1)
        raise RuntimeError(f"no fail-over within {timeout_s}s; see {self.workdir}")

    def stop(self) -> None:
        for proc in [*self.sentinels, *self.nodes]:
            proc.stop()


def _wait_ping(port: int, timeout_s: float = 10) -> None:
    client = redis.Redis(port=port)
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            try:
                client.ping()
                return
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
    finally:
        client.close()


def _wait_replicated(primary_port: int, replica_port: int, timeout_s: float = 10) -> None:
    client = redis.Redis(port=replica_port, decode_responses=True)
    deadline = time.monotonic() + timeout_s
    try:
        while client.info("replication").get("master_link_status") != "up":
            if time.monotonic() > deadline:
                raise RuntimeError(f"replica :{replica_port} never synced with :{primary_port}")
            time.sleep(0.05)
    finally:
        client.close()


def _is_primary(port: int) -> bool:
    client = redis.Redis(port=port, socket_timeout=1.0, decode_responses=True)
    try:
        return client.info("replication").get("role") == "master"
    except redis.RedisError:
        return False
    finally:
        client.close()
