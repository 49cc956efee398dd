"""Several gateway processes behind one port on one machine: `arbiter up --gateways N`, and
`arbiter gateway --processes N` (docker compose's `ARBITER_GATEWAYS`).

One gateway process is one event loop, and on a busy machine that loop is the ceiling of the
whole path (docs/performance.md). N processes share the port with `SO_REUSEPORT`
(`control_plane.gateway.serving`): the kernel spreads connections over them.

Rules and guarantees:

- Each process is a whole gateway replica: its own gateway id, grants stream and heartbeat, so
  the scheduler leader handles the loss of one process as that of any replica (its queued
  requests withdrawn, its granted ones aborted), and the others go on serving.
- Each *start* of a process takes a fresh id (`--id-prefix`: prefix + random suffix): a
  restarted process is a new replica, and the one it replaces is found lost and released,
  never mistaken for alive because its id beats again.
- Before any starts, nothing may listen on the port: a group never silently shares its port
  with the `SO_REUSEPORT` listeners of another deployment.
- The processes share their metrics through `PROMETHEUS_MULTIPROC_DIR` (emptied when the group
  starts), so a scrape of the shared port, whichever process answers, covers the group.
- With N = 1 the one process is started exactly as before (no shared port, no metrics files).
- Under `arbiter up` (`for_up`) the id prefix (`ARBITER_GATEWAY_ID`, else `gw`) is followed
  by a random tag of the run, and a health
  check is passed only by an answer under this process's prefix: the port is checked free
  before the start, but another deployment's gateway taking it in the instant before this one
  binds would otherwise answer for it.
"""

from __future__ import annotations

import secrets
import shutil
import signal
import socket
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from control_plane.core.cli_errors import OptionError
from control_plane.up.children import ARBITER, Child
from control_plane.up.supervisor import STOP_SIGNALS, Supervisor, catch_stop_signals

GATEWAYS_ENV = "ARBITER_GATEWAYS"
"""How many gateway processes `arbiter gateway` runs when `--processes` is not given."""
MULTIPROCESS_ENV = "PROMETHEUS_MULTIPROC_DIR"
"""prometheus_client's multiprocess directory (`control_plane.gateway.metrics`)."""


class PortTaken(RuntimeError):
    """Something already listens on the port a group of gateways was to share."""


def processes_from(flag: int | None, environ: Mapping[str, str]) -> int:
    """The number of gateway processes: `--processes`, else `ARBITER_GATEWAYS`, else 1.

    Raises `OptionError` naming the flag or variable when it is not a whole number ≥ 1.
    """
    if flag is not None:
        where, raw = "--processes", str(flag)
    else:
        where, raw = GATEWAYS_ENV, environ.get(GATEWAYS_ENV, "").strip() or "1"
    try:
        n = int(raw)
    except ValueError:
        raise OptionError(f"{where}: expected a whole number ≥ 1, got {raw!r}") from None
    if n < 1:
        raise OptionError(f"{where}: must be at least 1, got {n}")
    return n


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class GatewayGroup:
    """N gateway processes on `host:port`, as `Child`ren for a `Supervisor`.

    `env` is added to each process's environment (it must carry the admin token, if any: the
    supervisor's own secrets are not inherited). With `log_dir` each process logs to
    `log_dir/<name>.log`, else to this process's output. With `status_ports` each process of a
    group also listens on a free loopback port of its own, which its health check asks.
    """

    processes: int
    host: str
    port: int
    env: dict[str, str] = field(default_factory=dict)
    log_dir: Path | None = None
    metrics_dir: Path | None = None
    status_ports: bool = False
    id_prefix: str = "gw"
    args: tuple[str, ...] = ()
    """More flags for every `arbiter gateway` (`--redis-url …`)."""
    checked_ids: bool = False
    """Give the one process `id_prefix` too, and pass each health check only when the answer
    carries the process's own prefix (`Child.health_id`)."""

    @classmethod
    def for_up(
        cls, processes: int, host: str, port: int, state_dir: Path, prefix: str = "gw"
    ) -> GatewayGroup:
        """`arbiter up`'s gateways: ids `<prefix>-<run tag>-…` (`prefix`: its
        `ARBITER_GATEWAY_ID`), logs and metrics under `state_dir`, status ports for their
        health checks, the port checked (`prepare`; for one process too, whose health check
        asks the port itself: another listener there would answer it); `env` is set before
        `children()`."""
        if processes == 1 and port_in_use(host, port):
            raise PortTaken(f"{host}:{port} is already in use")
        group = cls(
            processes,
            host,
            port,
            log_dir=state_dir / "logs",
            metrics_dir=state_dir / "gateway-metrics",
            status_ports=True,
            id_prefix=f"{prefix or 'gw'}-{secrets.token_hex(3)}",
            checked_ids=True,
        )
        group.prepare()
        return group

    def children(self) -> list[Child]:
        """One `Child` per process: `gateway` alone, else `gateway-0` … `gateway-<N-1>`."""
        if self.processes == 1:
            health = f"http://{self.host}:{self.port}/readyz"
            if not self.checked_ids:
                return [self._child("gateway", [], {}, health)]
            flags = ["--id-prefix", self.id_prefix]
            return [self._child("gateway", flags, {}, health, f"{self.id_prefix}-")]
        return [self._member(i) for i in range(self.processes)]

    def _member(self, i: int) -> Child:
        if self.metrics_dir is None:
            raise ValueError("a group of gateway processes needs its metrics directory")
        prefix = f"{self.id_prefix}-p{i}"
        flags = ["--processes", "1", "--reuse-port", "--id-prefix", prefix]
        health = None
        if self.status_ports:
            status = _free_port()
            flags += ["--status-port", str(status)]
            health = f"http://{self.host}:{status}/readyz"
        env = {MULTIPROCESS_ENV: str(self.metrics_dir), GATEWAYS_ENV: "1"}
        return self._child(
            f"gateway-{i}", flags, env, health, f"{prefix}-" if self.checked_ids else None
        )

    def _child(
        self,
        name: str,
        flags: list[str],
        env: dict[str, str],
        health: str | None,
        health_id: str | None = None,
    ) -> Child:
        argv = [*ARBITER, "gateway", "--host", self.host, "--port", str(self.port)]
        return Child(
            name,
            [*argv, *self.args, *flags],
            None if self.log_dir is None else self.log_dir / f"{name}.log",
            {**self.env, **env},
            health_url=health,
            health_id=health_id,
        )

    def prepare(self) -> None:
        """Check the port is free and empty the metrics directory (a group only)."""
        if self.processes == 1:
            return
        if port_in_use(self.host, self.port):
            raise PortTaken(
                f"{self.host}:{self.port} is already in use; the {self.processes} gateway "
                "processes share it only among themselves"
            )
        if self.metrics_dir is not None:
            empty_metrics_dir(self.metrics_dir)


def port_in_use(host: str, port: int) -> bool:
    """True when something already listens on `host:port`, sharing it or not.

    A bind without `SO_REUSEPORT` fails against any listener, and `SO_REUSEADDR` lets it pass
    connections merely in TIME_WAIT.
    """
    family, kind, proto, _, addr = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(addr)
        except OSError:
            return True
    return False


def empty_metrics_dir(path: Path) -> None:
    """Create `path`, or delete the metrics files a previous group left in it."""
    path.mkdir(parents=True, exist_ok=True)
    for old in path.glob("*.db"):
        old.unlink(missing_ok=True)


def run_group(
    group: GatewayGroup, say: Callable[[str], None] = print, grace_s: float = 15.0
) -> None:
    """Start the group and keep it running (an exited process is restarted) until SIGINT or
    SIGTERM; then stop every process, each given `grace_s` (more than its own drain) before
    SIGKILL. Without a metrics directory it uses a temporary one."""
    temporary = group.metrics_dir is None
    if temporary:
        group.metrics_dir = Path(tempfile.mkdtemp(prefix="arbiter-gateway-metrics-"))
    supervisor = Supervisor(say=say)
    # SIGTERM (docker stop) and SIGHUP stop the group exactly like Ctrl-C
    catch_stop_signals()
    try:
        group.prepare()
        for child in group.children():
            supervisor.add(child)
            child.start()
        say(f"{group.processes} gateway processes on {group.host}:{group.port}")
        supervisor.start()
        while True:
            time.sleep(1.0)
    except KeyboardInterrupt:
        pass
    finally:
        for sig in (signal.SIGINT, *STOP_SIGNALS):
            signal.signal(sig, signal.SIG_IGN)
        supervisor.stop(grace_s)
        if temporary and group.metrics_dir is not None:
            shutil.rmtree(group.metrics_dir, ignore_errors=True)
