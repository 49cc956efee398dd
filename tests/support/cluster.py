"""A real Arbiter deployment for end-to-end tests: every part is its own process.

Redis comes from the session fixture; workers, schedulers and gateways are started with the
`arbiter` CLI (`python -m control_plane …`), exactly as operators run them.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from control_plane.state import StateStores
from control_plane.up.children import Child
from control_plane.up.seed import ensure_demo_tenants, register_model, register_workers
from storage.db import Database
from tests.support.ports import free_port
from workers.engine.profile import load_profile

ARBITER = [sys.executable, "-m", "control_plane"]


@dataclass
class Cluster:
    """Processes of one test deployment; `stop()` kills whatever is left."""

    redis_url: str
    workdir: Path
    cluster: str = "e2e"
    admin_token: str = "test-admin-token"
    policy: str = "vtc"
    children: list[Child] = field(default_factory=list)
    workers: list[dict[str, Any]] = field(default_factory=list)
    gateways: list[str] = field(default_factory=list)
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def db_url(self) -> str:
        return f"sqlite:///{self.workdir / 'arbiter.db'}"

    def env(self) -> dict[str, str]:
        return {
            "ARBITER_REDIS_URL": self.redis_url,
            "ARBITER_DATABASE_URL": self.db_url,
            "ARBITER_ADMIN_TOKEN": self.admin_token,
            "ARBITER_CLUSTER": self.cluster,
            "ARBITER_POLICY": self.policy,
            "ARBITER_LEASE_TTL_S": "1.0",
            "PYTHONUNBUFFERED": "1",
            **self.extra_env,
        }

    def _spawn(
        self,
        name: str,
        argv: list[str],
        health: str | None,
        timeout: float = 30,
        env: dict[str, str] | None = None,
    ) -> Child:
        child = Child(
            name,
            argv,
            self.workdir / "logs" / f"{name}.log",
            {**self.env(), **(env or {})},
            health_url=health,
        )
        self.children.append(child)
        child.start()
        child.wait_healthy(timeout)
        return child

    def database(self) -> Database:
        db = Database(self.db_url)
        db.migrate()
        return db

    def tenants(self, names: list[str]) -> dict[str, str]:
        db = self.database()
        try:
            return ensure_demo_tenants(db, names, {})
        finally:
            db.dispose()

    def start_worker(
        self,
        profile: str = "tiny-cpu",
        speed: float = 10.0,
        extra: list[str] | None = None,
        max_num_seqs: int | None = None,
    ) -> Child:
        i, port = len(self.workers), free_port()
        url = f"http://127.0.0.1:{port}"
        argv = [
            *ARBITER,
            "worker",
            "sim",
            "--port",
            str(port),
            "--profile",
            profile,
            "--speed",
            str(speed),
            "--seed",
            str(i),
            *(extra or []),
        ]
        if max_num_seqs is not None:
            argv += ["--max-num-seqs", str(max_num_seqs)]
        child = self._spawn(f"worker-{i}", argv, f"{url}/health")
        prof = load_profile(profile)
        rec = {
            "id": f"sim-{i}",
            "url": url,
            "kind": "sim",
            "model": prof.model.name,
            "profile": profile,
            "max_num_seqs": max_num_seqs or prof.max_num_seqs,
        }
        self.workers.append(rec)
        db = self.database()
        register_model(db, prof)
        asyncio.run(self._register(db, [rec]))
        db.dispose()
        return child

    async def _register(self, db: Database, recs: list[dict[str, Any]]) -> None:
        stores = StateStores.open(self.redis_url, self.cluster)
        await register_workers(db, stores, recs)
        await stores.aclose()

    def start_scheduler(self, *, with_recorder: bool = True, name: str = "scheduler") -> Child:
        """A scheduler replica; the first call with `with_recorder` also starts a recorder."""
        if with_recorder and not any(c.name == "recorder" for c in self.children):
            self.start_recorder()
        port = free_port()
        argv = [*ARBITER, "scheduler", "--port", str(port)]
        return self._spawn(name, argv, f"http://127.0.0.1:{port}/healthz")

    def start_recorder(self) -> Child:
        return self._spawn("recorder", [*ARBITER, "recorder"], None)

    def start_gateway(self, env: dict[str, str] | None = None) -> str:
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        self._spawn(
            f"gateway-{len(self.gateways)}",
            [*ARBITER, "gateway", "--port", str(port)],
            f"{url}/healthz",
            env=env,
        )
        self.gateways.append(url)
        return url

    def kill9(self, child: Child) -> None:
        assert child.proc is not None
        os.killpg(child.proc.pid, signal.SIGKILL)
        child.proc.wait(timeout=10)

    def stop(self) -> None:
        for child in reversed(self.children):
            child.stop(grace_s=5)

    def logs(self) -> str:
        return "\n".join(f"--- {c.name}\n{c.tail(30)}" for c in self.children)
