"""`arbiter up`: a whole deployment on this machine, supervised until Ctrl-C.

Starts a private `redis-server` (AOF in `<state-dir>/redis`), migrates SQLite (or the given
database), seeds demo tenants, starts N workers (simulated by default, or real vLLM), the
recorder, two scheduler replicas (leader and standby), the gateway (one process, or N sharing
its port: `control_plane.up.gateways`) and the console; prints how
to reach them and writes `<state-dir>/up.json` (mode 0600). Any child that exits is restarted
on the same port, with exponential backoff. Only Ctrl-C (or SIGTERM, or SIGHUP) stops the
deployment: every child in reverse order. One `up` per state directory: a second is refused
while the first lives, and one that follows an `up` killed outright first stops the children
it left (`control_plane.up.leftovers`); the private Redis requires a generated password
(`control_plane.up.redis_child`). A second run reuses the database and, when still valid, the
admin token and demo keys of the first.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from control_plane.state import StateStores
from control_plane.up.children import ARBITER, Child, NotHealthy
from control_plane.up.errors import UpError
from control_plane.up.gateways import GatewayGroup, PortTaken, port_in_use
from control_plane.up.leftovers import LOCK_FILE, StateLock, record_children, take_state_dir
from control_plane.up.log_rotation import LogLimit
from control_plane.up.redis_child import redis_child, redis_url, wait_redis
from control_plane.up.seed import (
    ensure_demo_tenants,
    register_model,
    register_workers,
    retire_workers,
)
from control_plane.up.state_files import private_dir, read_json, write_private_json
from control_plane.up.supervisor import Backoff, Supervisor
from storage.db import Database
from workers.engine.profile import load_profile

CONSOLE_API_ENV = "ARBITER_CONSOLE_API"
"""The admin API the console talks to: fixed by `arbiter up`, not chosen by a visitor."""
VLLM_STOP_GRACE_S = 40.0
"""A vLLM worker's SIGTERM-to-SIGKILL: more than its wrapper's own (`--stop-timeout`, 30 s),
so the wrapper stops vLLM (a process group of its own) before anything is killed."""


@dataclass
class UpOptions:
    workers: int = 2
    worker_kind: str = "sim"
    profile: str = "tiny-cpu"
    speed: float = 1.0
    port: int = 8080
    host: str = "127.0.0.1"
    console: bool = True
    console_port: int = 8501
    database_url: str = "sqlite:///./arbiter.db"
    state_dir: Path = field(default_factory=lambda: Path(".arbiter"))
    policy: str = "vtc"
    tenants: list[str] = field(default_factory=lambda: ["acme", "globex"])
    vllm_model: str | None = None
    vllm_python: str | None = None
    cluster: str = "local"
    max_num_seqs: int | None = None
    kv_tokens: int | None = None
    schedulers: int = 2
    gateways: int = 1
    """Gateway processes sharing `port` (`control_plane.up.gateways`)."""
    redis_fsync: str = "everysec"
    """The private Redis's `appendfsync`: `everysec` (as compose and Kubernetes run it) or
    `always` (an fsync before every reply: ~1 ms on each Redis hop of a request)."""
    backoff: Backoff = field(default_factory=Backoff)
    logs: LogLimit | None = field(default_factory=LogLimit)
    """Each child's log under `<state-dir>/logs` is rotated past this size (None: never)."""


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Deployment:
    """The children of one `arbiter up`, supervised, and the facts printed about them.

    Every child is restarted when it exits (see `Supervisor`) until `stop()`; each restart and
    its reason go to `say`, and `up.json` (mode 0600) is rewritten with every child's pid and
    restart count. The admin token is given to the gateway only (it serves the admin API).
    """

    def __init__(self, opts: UpOptions, say: Callable[[str], None] = print) -> None:
        self.opts = opts
        self.supervisor = Supervisor(
            opts.backoff, say=say, on_change=self._write_status, logs=opts.logs
        )
        self.redis_url = ""
        self._say = say
        self._lock: StateLock | None = None
        self.info: dict[str, Any] = {}
        self._status_lock = threading.Lock()

    @property
    def children(self) -> list[Child]:
        return self.supervisor.children

    @property
    def up_json(self) -> Path:
        return self.opts.state_dir / "up.json"

    def _env(self) -> dict[str, str]:
        o = self.opts
        return {
            "ARBITER_REDIS_URL": self.redis_url,
            "ARBITER_DATABASE_URL": o.database_url,
            "ARBITER_CLUSTER": o.cluster,
            "ARBITER_POLICY": o.policy,
            "PYTHONUNBUFFERED": "1",
        }

    def _spawn(self, child: Child, timeout_s: float) -> Child:
        if self._lock is not None:  # it ends with this `up` (`up/tether.py`)
            child.tie_to(self.opts.state_dir / LOCK_FILE)
        self.supervisor.add(child)
        child.start()
        self._record_children()
        try:
            child.wait_healthy(timeout_s)
        except NotHealthy as exc:
            raise UpError(str(exc)) from None
        return child

    def _record_children(self) -> None:
        """children.json, only while this `up` holds the state directory (another's is not
        ours to overwrite)."""
        if self._lock is not None:
            record_children(self.opts.state_dir, self.supervisor.children)

    def _take_state_dir(self) -> None:
        """Lock the state directory and stop what a dead `up` left there (`up/leftovers.py`)."""
        private_dir(self.opts.state_dir)
        self._lock = take_state_dir(self.opts.state_dir, self._say)

    def start(self) -> dict[str, Any]:
        o = self.opts
        self._take_state_dir()
        gateways = self._gateways()
        self._check_ports()
        previous = read_json(self.up_json)
        redis_port = _free_port()
        password = secrets.token_urlsafe(24)
        self.redis_url = redis_url(redis_port, password)
        child = self._spawn(redis_child(o.state_dir, redis_port, o.redis_fsync, password), 15)
        wait_redis(self.redis_url, child)
        db = Database(o.database_url)
        db.migrate()
        admin_token = str(previous.get("admin_token") or secrets.token_urlsafe(24))
        keys = ensure_demo_tenants(db, o.tenants, dict(previous.get("tenants") or {}))
        env = self._env()
        workers = self._start_workers(db, env, self._earlier_workers(previous))
        self._start_control_plane(env, admin_token, gateways)
        db.dispose()
        gateway_url = f"http://{o.host}:{o.port}"
        console_url = f"http://{o.host}:{o.console_port}" if self._console() else None
        self.info = {
            "gateway_url": gateway_url,
            "admin_token": admin_token,
            "tenants": keys,
            "workers": [w["url"] for w in workers],
            "worker_ids": [w["id"] for w in workers],
            "redis_url": self.redis_url,
            "cluster": o.cluster,
            "database_url": o.database_url,
            "console_url": console_url,
            "up_pid": os.getpid(),
        }
        self._write_status(self.supervisor.status())
        return self.info

    def _write_status(self, children: dict[str, dict[str, Any]]) -> None:
        with self._status_lock:
            self._record_children()
            if self.info:
                write_private_json(self.up_json, {**self.info, "children": children})

    def _earlier_workers(self, previous: dict[str, Any]) -> list[str]:
        """The workers the previous `up` of this state directory registered in the same cluster
        and database (an `up.json` older than `worker_ids` names none)."""
        o, ids = self.opts, previous.get("worker_ids")
        same = (previous.get("cluster"), previous.get("database_url")) == (
            o.cluster,
            o.database_url,
        )
        return [str(i) for i in ids] if same and isinstance(ids, list) else []

    def _start_workers(
        self, db: Database, env: dict[str, str], earlier: list[str]
    ) -> list[dict[str, Any]]:
        o = self.opts
        workers: list[dict[str, Any]] = []
        if o.worker_kind == "sim":
            profile = load_profile(o.profile)
            register_model(db, profile)
        for i in range(o.workers):
            port = _free_port()
            url = f"http://127.0.0.1:{port}"
            if o.worker_kind == "sim":
                argv = [
                    *ARBITER,
                    "worker",
                    "sim",
                    "--port",
                    str(port),
                    "--profile",
                    o.profile,
                    "--speed",
                    str(o.speed),
                    "--seed",
                    str(i),
                ]
                if o.max_num_seqs:
                    argv += ["--max-num-seqs", str(o.max_num_seqs)]
                if o.kv_tokens:
                    argv += ["--kv-tokens", str(o.kv_tokens)]
                rec = {
                    "id": f"sim-{i}",
                    "url": url,
                    "kind": "sim",
                    "model": profile.model.name,
                    "profile": o.profile,
                    "max_num_seqs": o.max_num_seqs or profile.max_num_seqs,
                }
                timeout, grace = 30.0, None
            else:
                if not o.vllm_model:
                    raise UpError("--worker-kind vllm needs --vllm-model (a directory or name)")
                argv = [
                    *ARBITER,
                    "worker",
                    "vllm",
                    "--model",
                    o.vllm_model,
                    "--port",
                    str(port),
                    "--served-model-name",
                    Path(o.vllm_model).name,
                    "--tiny",
                ]
                if o.vllm_python:
                    argv += ["--python", o.vllm_python]
                rec = {
                    "id": f"vllm-{i}",
                    "url": url,
                    "kind": "vllm",
                    "model": Path(o.vllm_model).name,
                    "max_num_seqs": 64,
                }
                timeout, grace = 600.0, VLLM_STOP_GRACE_S
            self._spawn(
                Child(
                    f"worker-{i}",
                    argv,
                    o.state_dir / "logs" / f"worker-{i}.log",
                    env,
                    health_url=f"{url}/health",
                    grace_s=grace,
                ),
                timeout,
            )
            workers.append(rec)
        stores = StateStores.open(self.redis_url, o.cluster)

        async def register() -> None:
            current = {w["id"] for w in workers}
            gone = await retire_workers(db, stores, [i for i in earlier if i not in current])
            if gone:
                self._say(f"forgot workers of an earlier run, not started now: {', '.join(gone)}")
            await register_workers(db, stores, workers)
            await stores.aclose()

        asyncio.run(register())
        return workers

    def _check_ports(self) -> None:
        """The gateway's and the console's ports are free: their readiness checks ask those
        ports, which another listener would answer."""
        o = self.opts
        if port_in_use(o.host, o.port):
            raise UpError(f"--port: {o.host}:{o.port} is already in use")
        if self._console() and port_in_use(o.host, o.console_port):
            raise UpError(f"--console-port: {o.host}:{o.console_port} is already in use")

    def _gateways(self) -> GatewayGroup:
        """The gateway processes, their port checked free (N > 1: they share it)."""
        o = self.opts
        try:
            prefix = os.environ.get("ARBITER_GATEWAY_ID", "").strip()
            return GatewayGroup.for_up(o.gateways, o.host, o.port, o.state_dir, prefix)
        except PortTaken as exc:
            raise UpError(f"--port: {exc}") from None

    def _start_control_plane(
        self, env: dict[str, str], admin_token: str, gateways: GatewayGroup
    ) -> None:
        o = self.opts
        # the recorder gets its own process so SQL work never holds the scheduler's GIL
        # a stable consumer name: a restarted recorder replays its own unacknowledged events
        metrics_port = _free_port()
        recorder_env = {
            **env,
            "ARBITER_RECORDER_NAME": f"up-{o.cluster}",
            "ARBITER_RECORDER_METRICS_PORT": str(metrics_port),
        }
        self._spawn(
            Child(
                "recorder",
                [*ARBITER, "recorder"],
                o.state_dir / "logs" / "recorder.log",
                recorder_env,
                health_url=f"http://127.0.0.1:{metrics_port}/metrics",
            ),
            30,
        )
        for i in range(o.schedulers):
            port = _free_port()
            self._spawn(
                Child(
                    f"scheduler-{i}",
                    [*ARBITER, "scheduler"],
                    o.state_dir / "logs" / f"scheduler-{i}.log",
                    {**env, "ARBITER_SCHEDULER_PORT": str(port)},
                    health_url=f"http://127.0.0.1:{port}/healthz",
                ),
                30,
            )
        gateways.env = {**env, "ARBITER_ADMIN_TOKEN": admin_token}
        self._check_ports()  # again: starting the workers may have taken minutes
        for gateway in gateways.children():
            self._spawn(gateway, 30)
        if self._console():
            app = Path(__file__).resolve().parents[2] / "console" / "streamlit_app.py"
            self._spawn(
                Child(
                    "console",
                    [
                        sys.executable,
                        "-m",
                        "streamlit",
                        "run",
                        str(app),
                        "--server.port",
                        str(o.console_port),
                        "--server.headless",
                        "true",
                        "--browser.gatherUsageStats",
                        "false",
                        "--client.toolbarMode",
                        "viewer",
                    ],
                    o.state_dir / "logs" / "console.log",
                    {"PYTHONUNBUFFERED": "1", CONSOLE_API_ENV: f"http://{o.host}:{o.port}"},
                    health_url=f"http://{o.host}:{o.console_port}/_stcore/health",
                ),
                60,
            )

    def _console(self) -> bool:
        app = Path(__file__).resolve().parents[2] / "console" / "streamlit_app.py"
        return self.opts.console and app.exists()

    def watch(self) -> None:
        """Supervise the children until interrupted (SIGINT, or SIGTERM made KeyboardInterrupt)."""
        self.supervisor.start()
        while True:
            time.sleep(1.0)

    def stop(self) -> None:
        """No more restarts; children stop in reverse order of start; up.json says so; the
        state directory is unlocked."""
        try:
            self.supervisor.stop()
            self._write_status(self.supervisor.status())
        finally:
            if self._lock is not None:
                self._lock.release()
