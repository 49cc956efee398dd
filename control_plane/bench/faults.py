"""The faults `arbiter bench faults` injects into a running `arbiter up`, one process each.

Each fault hits exactly one process by pid, found the way an operator would (`up.json`, else
the process table): `kill -9` of a worker, of the scheduler that says it leads, of the
recorder, of the gateway or of `redis-server`, or Redis frozen with SIGSTOP for `pause_s` and
then resumed with SIGCONT. Nothing is restarted by the bench: bringing a process back is the
deployment's job, and the bench measures whether and how fast it does.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from control_plane.bench import procs
from control_plane.bench.off_loop import off_loop
from control_plane.bench.up_process import UpProcess

REDIS_PAUSE_S = 8.0


class FaultError(RuntimeError):
    """The process a fault targets could not be found."""


@dataclass(frozen=True)
class Fault:
    """A named fault; `inject` returns what it did, in words (pids included)."""

    name: str
    what: str
    inject: Callable[[UpProcess], Coroutine[Any, Any, str]]


async def _find(up: UpProcess, role: str) -> procs.Proc:
    found = [p for p in await off_loop(up.processes) if p.role == role]
    if not found:
        raise FaultError(f"no {role} process found in the deployment")
    return found[0]


def _kill9(role: str) -> Callable[[UpProcess], Coroutine[Any, Any, str]]:
    async def inject(up: UpProcess) -> str:
        target = await _find(up, role)
        procs.kill(target.pid, signal.SIGKILL)
        return f"SIGKILL {target.name} (pid {target.pid})"

    return inject


async def _kill_leader(up: UpProcess) -> str:
    found = await off_loop(up.processes)
    target = await off_loop(procs.leader, found)
    if target is None:
        raise FaultError("no scheduler says it leads")
    procs.kill(target.pid, signal.SIGKILL)
    others = [p.name for p in found if p.role == "scheduler" and p.pid != target.pid]
    return f"SIGKILL leader {target.name} (pid {target.pid}); standbys: {others or 'none'}"


async def _pause_redis(up: UpProcess) -> str:
    target = await _find(up, "redis")
    procs.kill(target.pid, signal.SIGSTOP)
    try:
        await asyncio.sleep(REDIS_PAUSE_S)
    finally:
        procs.kill(target.pid, signal.SIGCONT)
    return f"SIGSTOP redis (pid {target.pid}), SIGCONT after {REDIS_PAUSE_S:g}s"


FAULTS: dict[str, Fault] = {
    f.name: f
    for f in (
        Fault("worker", "kill -9 of one worker", _kill9("worker")),
        Fault("scheduler-leader", "kill -9 of the scheduler leader", _kill_leader),
        Fault("recorder", "kill -9 of the recorder", _kill9("recorder")),
        Fault("gateway", "kill -9 of the gateway", _kill9("gateway")),
        Fault("redis-pause", f"Redis paused {REDIS_PAUSE_S:g}s (SIGSTOP/SIGCONT)", _pause_redis),
        Fault("redis-kill", "kill -9 of redis-server (restarted by `arbiter up`)", _kill9("redis")),
    )
}
