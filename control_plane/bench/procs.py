"""The processes of one `arbiter up` deployment, found from `up.json` or the process table.

Read-only over `/proc` (Linux): roles come from each process's command line (`redis-server`,
`arbiter gateway|scheduler|recorder|worker …`, `streamlit` for the console), so the same code
finds the children of an `arbiter up` this process started (its descendants) and those of one it
attaches to (every process whose environment names the deployment's Redis URL).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from control_plane.up import tether

ROLES = ("redis", "gateway", "scheduler", "recorder", "worker", "console")
_SUBCOMMANDS = {"gateway", "scheduler", "recorder", "worker"}
TETHER = tether.__name__
"""How a tether appears on a command line (`python -m control_plane.up.tether -- …`)."""
PROC = Path("/proc")


@dataclass(frozen=True, order=True)
class Proc:
    """One process of the deployment: its role (one of `ROLES`), a display name and its pid."""

    role: str
    name: str
    pid: int


def cmdline(pid: int) -> list[str]:
    """The argv of `pid` ([] when it is gone or unreadable)."""
    try:
        raw = (PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def environ(pid: int) -> dict[str, str]:
    """The environment `pid` started with ({} when unreadable)."""
    try:
        raw = (PROC / str(pid) / "environ").read_bytes()
    except OSError:
        return {}
    pairs = (item.decode(errors="replace").partition("=") for item in raw.split(b"\0") if item)
    return {k: v for k, _, v in pairs}


def _status_field(pid: int, name: str) -> str | None:
    try:
        for line in (PROC / str(pid) / "status").read_text().splitlines():
            if line.startswith(f"{name}:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


def alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie."""
    state = _status_field(pid, "State")
    return state is not None and not state.startswith("Z")


def rss_kb(pid: int) -> int | None:
    """Resident set size from `/proc/<pid>/status` VmRSS, in KiB (None when gone)."""
    value = _status_field(pid, "VmRSS")
    return int(value.split()[0]) if value else None


def parent(pid: int) -> int | None:
    value = _status_field(pid, "PPid")
    return int(value) if value else None


def role_of(argv: list[str]) -> str | None:
    """The deployment role a command line runs, or None for anything else."""
    if not argv:
        return None
    # redis-server rewrites its title into one string: "/usr/bin/redis-server 127.0.0.1:6379"
    if Path(argv[0].split(" ", 1)[0]).name.startswith("redis-server"):
        return "redis"
    if any("streamlit" in part for part in argv[:3]):
        return "console"
    for i, part in enumerate(argv[:-1]):
        if part == "control_plane" or Path(part).name == "arbiter":
            sub = argv[i + 1]
            return sub if sub in _SUBCOMMANDS else None
    return None


def all_pids() -> list[int]:
    return sorted(int(p.name) for p in PROC.iterdir() if p.name.isdigit())


def descendants(root: int) -> list[int]:
    """Every live process below `root` in the process tree."""
    children: dict[int, list[int]] = {}
    for pid in all_pids():
        ppid = parent(pid)
        if ppid is not None:
            children.setdefault(ppid, []).append(pid)
    out: list[int] = []
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return sorted(out)


def _redis_port(redis_url: str) -> str:
    return redis_url.rsplit(":", 1)[-1].split("/", 1)[0]


def members(redis_url: str) -> list[int]:
    """Processes of the deployment whose Redis is `redis_url`: its clients and the server."""
    port = _redis_port(redis_url)
    out = []
    for pid in all_pids():
        argv = cmdline(pid)
        if role_of(argv) == "redis":
            if port in argv:
                out.append(pid)
        elif environ(pid).get("ARBITER_REDIS_URL") == redis_url:
            out.append(pid)
    return out


def name_procs(pids: Iterable[int]) -> list[Proc]:
    """Classify `pids` by role; names are `role` or `role-i` (i in pid order) when repeated."""
    by_role: dict[str, list[int]] = {}
    for pid in sorted(set(pids)):
        role = role_of(cmdline(pid))
        if role is not None and alive(pid):
            by_role.setdefault(role, []).append(pid)
    out: list[Proc] = []
    for role, pids_of in by_role.items():
        for i, pid in enumerate(pids_of):
            out.append(Proc(role, role if len(pids_of) == 1 else f"{role}-{i}", pid))
    return sorted(out)


def _named_pids(info: Mapping[str, Any]) -> dict[str, int]:
    named: dict[str, int] = {}
    pids = info.get("pids")
    if isinstance(pids, Mapping):
        named.update({str(k): v for k, v in pids.items() if isinstance(v, int)})
    children = info.get("children")
    if isinstance(children, Mapping):
        children = [{"name": k, **v} for k, v in children.items() if isinstance(v, Mapping)]
    for item in children if isinstance(children, list) else []:
        if isinstance(item, Mapping) and isinstance(item.get("pid"), int):
            named[str(item.get("name"))] = item["pid"]
    return named


def from_up_json(info: Mapping[str, Any]) -> list[Proc]:
    """Processes named in `up.json` (`pids: {name: pid}` or `children: [{name, pid}]`), if any;
    for a child run under `arbiter up`'s tether (Redis, the console), the command it runs."""
    out = []
    for name, listed in _named_pids(info).items():
        pid = through_tether(listed)
        role = role_of(cmdline(pid))
        if role is not None and alive(pid):
            out.append(Proc(role, name, pid))
    return sorted(out)


def is_tether(pid: int) -> bool:
    """Whether `pid` runs `arbiter up`'s tether (`python -m control_plane.up.tether …`)."""
    return TETHER in cmdline(pid)[:3]


def through_tether(pid: int) -> int:
    """The process a tether (`control_plane.up.tether`) runs, else `pid` itself: a fault must
    hit redis-server, and its CPU be read from it, not from the small parent that waits."""
    if not is_tether(pid):
        return pid
    below = [c for c in descendants(pid) if role_of(cmdline(c)) is not None]
    return below[0] if below else pid


def discover(info: Mapping[str, Any], root: int | None = None) -> list[Proc]:
    """The deployment's live processes: `up.json`'s pids, else the process tree below `root`,
    else every process using the deployment's Redis."""
    listed = from_up_json(info)
    if listed:
        return listed
    if root is not None and alive(root):
        found = name_procs(descendants(root))
        if found:
            return found
    return name_procs(members(str(info.get("redis_url", ""))))


def scheduler_port(pid: int) -> int | None:
    """The status port of a scheduler process (`--port` or `ARBITER_SCHEDULER_PORT`)."""
    argv = cmdline(pid)
    if "--port" in argv[:-1]:
        return int(argv[argv.index("--port") + 1])
    value = environ(pid).get("ARBITER_SCHEDULER_PORT")
    return int(value) if value and value.isdigit() else None


def scheduler_role(pid: int, timeout_s: float = 2.0) -> str | None:
    """`leader` or `standby` from the scheduler's `/readyz`, or None when it does not say."""
    port = scheduler_port(pid)
    if port is None:
        return None
    with contextlib.suppress(httpx.HTTPError, ValueError):
        body = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=timeout_s).json()
        role = body.get("role") if isinstance(body, dict) else None
        return str(role) if role else None
    return None


def leader(procs: Iterable[Proc]) -> Proc | None:
    """The scheduler that says it leads (the only scheduler when none answers)."""
    schedulers = [p for p in procs if p.role == "scheduler"]
    for p in schedulers:
        if scheduler_role(p.pid) == "leader":
            return p
    return schedulers[0] if len(schedulers) == 1 else None


def kill(pid: int, sig: int) -> None:
    """Send `sig` to one process (never its group: a fault hits exactly one process)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)
