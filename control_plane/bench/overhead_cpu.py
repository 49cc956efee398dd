"""CPU each process of the deployment spends per request, measured round by round.

`py-spy` (`--profile`) shows where the time goes but slows what it samples; this meter only
reads the kernel's CPU accounting (`/proc/<pid>/stat`: user + system time, in clock ticks)
of every supervised process (Redis, workers, schedulers, recorder, gateways) and of the load
generator itself, before and after each gateway round. Divided by the round's requests it is
the CPU-ms per request of each process, undistorted — the figure that says which process a
concurrency is waiting for on a machine whose cores they all share.

Beside it, each process's context switches, summed over its threads
(`/proc/<pid>/task/*/status`): *waits* (voluntary: the process blocked — on a socket, a
timer, a lock — and was woken again) and *preemptions* (involuntary: the kernel gave its core
to another runnable task). Waits per request count the hand-overs a request costs each
process, a figure that timing noise does not move; preemptions per request show the cores
contended. A thread that ends between the readings takes its switches with it (the
deployment's processes keep theirs). Linux only: elsewhere `CpuMeter.available` is False and
nothing is read.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from control_plane.bench.procs import is_tether, through_tether

_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 0.01


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of `pid` so far (None when it cannot be read)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name (field 2) may hold spaces: count fields after its closing parenthesis
    fields = raw[raw.rfind(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) * _TICK_S


def context_switches(pid: int) -> tuple[int, int] | None:
    """Voluntary and involuntary context switches of `pid`'s live threads so far (None when
    the process cannot be read)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    waits = preempted = 0
    for tid in tids:
        try:
            status = Path(f"/proc/{pid}/task/{tid}/status").read_text()
        except OSError:
            continue  # the thread ended meanwhile
        for line in status.splitlines():
            if line.startswith("voluntary_ctxt_switches:"):
                waits += int(line.split()[1])
            elif line.startswith("nonvoluntary_ctxt_switches:"):
                preempted += int(line.split()[1])
    return waits, preempted


@dataclass(frozen=True, slots=True)
class Usage:
    """What the kernel accounted to one process (so far, or between two readings)."""

    cpu_s: float
    waits: int
    """Voluntary context switches: the process blocked and was woken again."""
    preempted: int
    """Involuntary context switches: its core was given to another runnable task."""

    def __sub__(self, other: Usage) -> Usage:
        return Usage(
            self.cpu_s - other.cpu_s, self.waits - other.waits, self.preempted - other.preempted
        )


class CpuMeter:
    """CPU seconds and context switches of named processes between `start()` and `stop()`.

    Guarantee: a process that is not running at both readings (restarted, exited) is left out
    rather than reported with a wrong difference."""

    def __init__(self, pids: dict[str, int | None]) -> None:
        self._pids = {name: pid for name, pid in pids.items() if pid}
        self._pids.setdefault("loadgen", os.getpid())
        self._before: dict[str, Usage] = {}
        self.spent: dict[str, Usage] = {}
        """Per process, what the last `start()`–`stop()` interval cost."""

    @property
    def available(self) -> bool:
        return Path("/proc/self/stat").exists()

    def start(self) -> None:
        self._before = self._read()

    def stop(self) -> dict[str, float]:
        """CPU seconds per process since `start()` (all of it in `spent`)."""
        after = self._read()
        self.spent = {n: after[n] - self._before[n] for n in after if n in self._before}
        return {n: usage.cpu_s for n, usage in self.spent.items()}

    def _read(self) -> dict[str, Usage]:
        if not self.available:
            return {}
        out: dict[str, Usage] = {}
        for name, pid in self._pids.items():
            s = cpu_seconds(pid)
            switches = context_switches(pid)
            if s is not None and switches is not None:
                out[name] = Usage(s, *switches)
        return out


def measured_pids(status: Mapping[str, Mapping[str, Any]]) -> dict[str, int | None]:
    """Per supervised child (`Supervisor.status()`), the pid whose CPU is its own: for one run
    under `arbiter up`'s tether (Redis, the console), the command the tether runs — the
    tether itself only waits (reading it gave Redis 0.000 CPU-ms per request)."""
    pids: dict[str, int | None] = {}
    for name, child in status.items():
        pid = child.get("pid")
        if not isinstance(pid, int):
            pids[name] = None
            continue
        found = through_tether(pid)
        # a tether whose command has not started yet: left out of the round, not read as 0
        pids[name] = None if found == pid and is_tether(pid) else found
    return pids


def per_request_ms(cpu_s: dict[str, float], requests: int) -> dict[str, float]:
    """CPU-ms per request of each process, and their `total`."""
    if requests <= 0:
        return {}
    out = {name: 1000.0 * s / requests for name, s in sorted(cpu_s.items())}
    out["total"] = sum(out.values())
    return out


def switches_per_request(
    spent: dict[str, Usage], requests: int
) -> tuple[dict[str, float], dict[str, float]]:
    """Waits and preemptions per request of each process, each with their `total`."""
    if requests <= 0:
        return {}, {}
    waits = {name: u.waits / requests for name, u in sorted(spent.items())}
    preempted = {name: u.preempted / requests for name, u in sorted(spent.items())}
    waits["total"] = sum(waits.values())
    preempted["total"] = sum(preempted.values())
    return waits, preempted
