"""Several gateway processes behind one port: the flag and variable, each process's argv and
environment, the port check, and a real group (`arbiter gateway --processes 2`) on a real
Redis: both processes serve the one port under their own ids, the admin API answers through it,
a killed process comes back under a fresh id, and SIGTERM stops them all."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from control_plane.core.cli_errors import OptionError
from control_plane.up.children import Child
from control_plane.up.gateways import (
    GATEWAYS_ENV,
    MULTIPROCESS_ENV,
    GatewayGroup,
    PortTaken,
    port_in_use,
    processes_from,
)
from storage.db import Database
from tests.support.ports import free_port

ARBITER = ["-m", "control_plane"]


def test_processes_come_from_the_flag_then_the_variable_then_one() -> None:
    assert processes_from(None, {}) == 1
    assert processes_from(None, {GATEWAYS_ENV: " 3 "}) == 3
    assert processes_from(2, {GATEWAYS_ENV: "5"}) == 2
    with pytest.raises(OptionError, match=r"^--processes: must be at least 1, got 0$"):
        processes_from(0, {})
    with pytest.raises(OptionError, match=r"^ARBITER_GATEWAYS: expected a whole number"):
        processes_from(None, {GATEWAYS_ENV: "two"})
    with pytest.raises(OptionError, match=r"^ARBITER_GATEWAYS: must be at least 1, got -1$"):
        processes_from(None, {GATEWAYS_ENV: "-1"})


def test_one_gateway_is_started_as_before(tmp_path: Path) -> None:
    (child,) = GatewayGroup(1, "127.0.0.1", 8080, {"K": "v"}, log_dir=tmp_path).children()
    assert child.name == "gateway"
    assert child.argv[-5:] == ["gateway", "--host", "127.0.0.1", "--port", "8080"]
    assert child.env == {"K": "v"}
    assert child.health_url == "http://127.0.0.1:8080/readyz"
    assert child.log_path == tmp_path / "gateway.log"


def test_under_up_each_gateway_s_health_is_checked_against_its_own_id(tmp_path: Path) -> None:
    port = free_port()
    (one,) = GatewayGroup.for_up(1, "127.0.0.1", port, tmp_path).children()
    prefix = one.argv[one.argv.index("--id-prefix") + 1]
    assert re.fullmatch(r"gw-[0-9a-f]{6}", prefix) and one.health_id == f"{prefix}-"
    assert one.health_url == f"http://127.0.0.1:{port}/readyz"
    two = GatewayGroup.for_up(2, "127.0.0.1", port, tmp_path).children()
    prefixes = [c.argv[c.argv.index("--id-prefix") + 1] for c in two]
    assert prefixes[0].endswith("-p0") and prefixes[1] == prefixes[0][:-1] + "1"
    assert prefixes[0] != prefix  # a tag per run
    assert [c.health_id for c in two] == [f"{p}-" for p in prefixes]


def test_each_process_of_a_group_is_its_own_replica(tmp_path: Path) -> None:
    group = GatewayGroup(
        3,
        "127.0.0.1",
        8080,
        {"ARBITER_ADMIN_TOKEN": "t"},
        metrics_dir=tmp_path / "m",
        status_ports=True,
        id_prefix="gateway-1",
        args=("--redis-url", "redis://r:6379/0"),
    )
    children = group.children()
    assert [c.name for c in children] == ["gateway-0", "gateway-1", "gateway-2"]
    prefixes, status = set(), set()
    for child in children:
        argv = child.argv
        assert argv[argv.index("--port") + 1] == "8080"
        assert "--reuse-port" in argv and argv[argv.index("--processes") + 1] == "1"
        assert argv[argv.index("--redis-url") + 1] == "redis://r:6379/0"
        prefixes.add(argv[argv.index("--id-prefix") + 1])
        port = argv[argv.index("--status-port") + 1]
        status.add(port)
        assert child.health_url == f"http://127.0.0.1:{port}/readyz"
        assert child.env == {
            "ARBITER_ADMIN_TOKEN": "t",
            MULTIPROCESS_ENV: str(tmp_path / "m"),
            GATEWAYS_ENV: "1",
        }
        assert child.log_path is None  # no log_dir: the supervisor's own output
    assert prefixes == {"gateway-1-p0", "gateway-1-p1", "gateway-1-p2"}
    assert len(status) == 3
    with pytest.raises(ValueError, match="metrics directory"):
        GatewayGroup(2, "127.0.0.1", 8080).children()


def test_a_port_with_any_listener_is_in_use() -> None:
    port = free_port()
    assert not port_in_use("127.0.0.1", port)
    with socket.socket() as plain:
        plain.bind(("127.0.0.1", port))
        plain.listen()
        assert port_in_use("127.0.0.1", port)
    shared = socket.socket()
    shared.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    with shared:
        shared.bind(("127.0.0.1", port))
        shared.listen()
        assert port_in_use("127.0.0.1", port)  # another deployment's group: never joined


def test_prepare_refuses_a_taken_port_and_empties_the_metrics_dir(tmp_path: Path) -> None:
    metrics = tmp_path / "m"
    metrics.mkdir()
    (metrics / "counter_123.db").write_bytes(b"old")
    (metrics / "keep.txt").write_text("not ours")
    port = free_port()
    group = GatewayGroup(2, "127.0.0.1", port, metrics_dir=metrics)
    group.prepare()
    assert sorted(p.name for p in metrics.iterdir()) == ["keep.txt"]
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        with pytest.raises(PortTaken, match=f"127.0.0.1:{port} is already in use"):
            group.prepare()
    GatewayGroup(1, "127.0.0.1", port).prepare()  # one process: left to the gateway itself


def test_a_group_on_a_taken_port_says_so_in_one_line() -> None:
    port = free_port()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        result = subprocess.run(
            [sys.executable, *ARBITER, "gateway", "--processes", "2", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"error: 127.0.0.1:{port} is already in use; the 2 gateway processes share it only "
        "among themselves"
    ]


# -- a real group ------------------------------------------------------------------------------


def _gateway_env(redis_url: str, tmp_path: Path, cluster: str) -> dict[str, str]:
    """A gateway's environment (id prefix `edge`) over a freshly migrated SQLite database."""
    db_url = f"sqlite:///{tmp_path / 'arbiter.db'}"
    db = Database(db_url)
    db.migrate()
    db.dispose()
    return {
        "ARBITER_REDIS_URL": redis_url,
        "ARBITER_DATABASE_URL": db_url,
        "ARBITER_CLUSTER": cluster,
        "ARBITER_GATEWAY_ID": "edge",
        "PYTHONUNBUFFERED": "1",
    }


@pytest.fixture
def group(redis_url: str, tmp_path: Path) -> Iterator[tuple[Child, str]]:
    port = free_port()
    env = {
        **_gateway_env(redis_url, tmp_path, "gw-group"),
        "ARBITER_ADMIN_TOKEN": "group-admin-token",
        GATEWAYS_ENV: "2",
    }
    parent = Child(
        "gateways",
        [sys.executable, *ARBITER, "gateway", "--port", str(port)],
        tmp_path / "gateways.log",
        env,
    )
    parent.start()
    try:
        yield parent, f"http://127.0.0.1:{port}"
    finally:
        parent.stop(grace_s=20)


def _ids(url: str, timeout_s: float, want: int, exclude: frozenset[str] = frozenset()) -> set[str]:
    """Gateway ids answering `/readyz` on the shared port (503 without a scheduler: it still
    names the process), until `want` of them that are not in `exclude` have answered."""
    seen: set[str] = set()
    deadline = time.monotonic() + timeout_s
    while len(seen - exclude) < want and time.monotonic() < deadline:
        try:
            seen.add(httpx.get(f"{url}/readyz", timeout=2.0).json()["gateway_id"])
        except (httpx.HTTPError, ValueError, KeyError):
            time.sleep(0.2)
    return seen


def _children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(") ", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid and not fields[0].startswith("Z"):
            out.append(int(stat.parent.name))
    return out


def test_a_group_serves_one_port_and_replaces_a_killed_process(
    group: tuple[Child, str],
) -> None:
    parent, url = group
    assert parent.proc is not None
    ids = _ids(url, 90, 2)
    assert len(ids) == 2, parent.tail()
    assert {i.rsplit("-", 1)[0] for i in ids} == {"edge-p0", "edge-p1"}
    admin = httpx.get(
        f"{url}/admin/tenants", headers={"Authorization": "Bearer group-admin-token"}, timeout=10
    )
    assert admin.status_code == 200, admin.text  # the token reached both processes
    assert httpx.get(f"{url}/metrics", timeout=10).status_code == 200
    members = _children(parent.proc.pid)
    assert len(members) == 2
    os.kill(members[0], signal.SIGKILL)
    fresh = _ids(url, 90, 1, exclude=frozenset(ids))
    assert len(fresh - ids) == 1, parent.tail()  # the restarted process is a new replica
    assert len(_children(parent.proc.pid)) == 2
    members = _children(parent.proc.pid)
    parent.stop(grace_s=20)
    assert parent.proc.returncode == 0
    for pid in members:
        assert not Path(f"/proc/{pid}").exists() or _zombie(pid)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].startswith("Z")
    except OSError:
        return True


def test_a_single_gateway_with_a_fixed_id_is_a_new_replica_at_every_start(
    redis_url: str, tmp_path: Path
) -> None:
    """`ARBITER_GATEWAY_ID` fixed (compose's `gateway-1`, a pod's name) and one process: a
    restart must not come back under its predecessor's id — the leader's sweeper releases
    what a replica held only once its liveness has expired, and a successor beating under the
    same id would keep the dead process's granted requests in flight for ever."""
    env = _gateway_env(redis_url, tmp_path, "gw-single")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    ids: list[str] = []
    for start in range(2):
        child = Child(
            "gateway",
            [sys.executable, *ARBITER, "gateway", "--port", str(port)],
            tmp_path / f"gateway-{start}.log",
            env,
        )
        child.start()
        try:
            seen = _ids(url, 90, 1)
            assert len(seen) == 1, child.tail()
            ids += seen
        finally:
            child.stop(grace_s=20)
    assert all(re.fullmatch(r"edge-[0-9a-f]{8}", i) for i in ids), ids
    assert ids[0] != ids[1]


def test_up_checks_the_port_of_a_single_gateway_too(tmp_path: Path) -> None:
    """One gateway's health check asks the port itself: whatever else listens there (an
    earlier deployment's gateway) would answer it, so `up` refuses the port up front."""
    port = free_port()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        with pytest.raises(PortTaken, match=f"127.0.0.1:{port} is already in use"):
            GatewayGroup.for_up(1, "127.0.0.1", port, tmp_path)
    (child,) = GatewayGroup.for_up(1, "127.0.0.1", port, tmp_path).children()
    assert child.health_url == f"http://127.0.0.1:{port}/readyz"
