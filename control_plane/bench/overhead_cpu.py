"""CPU each process of the deployment spends per request, measured round by round.

`py-spy` (`--profile`) shows where the time goes but slows what it samples; this meter only
reads the kernel's CPU accounting (`/proc/<pid>/stat`: user + system time, in clock ticks)
of every supervised process (Redis, workers, schedulers, recorder, gateways) and of the load
generator itself, before and after each gateway round. Divided by the round's requests it is
the CPU-ms per request of each process, undistorted — the figure that says which process a
concurrency is waiting for on a machine whose cores they all share. Linux only: elsewhere
`CpuMeter.available` is False and nothing is read.
"""

from __future__ import annotations

import os
from pathlib import Path

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


class CpuMeter:
    """CPU seconds of named processes between `start()` and `stop()`.

    Guarantee: a process that is not running at both readings (restarted, exited) is left out
    rather than reported with a wrong difference."""

    def __init__(self, pids: dict[str, int | None]) -> None:
        self._pids = {name: pid for name, pid in pids.items() if pid}
        self._pids.setdefault("loadgen", os.getpid())
        self._before: dict[str, float] = {}

    @property
    def available(self) -> bool:
        return Path("/proc/self/stat").exists()

    def start(self) -> None:
        self._before = self._read()

    def stop(self) -> dict[str, float]:
        """CPU seconds per process since `start()`."""
        after = self._read()
        return {n: after[n] - self._before[n] for n in after if n in self._before}

    def _read(self) -> dict[str, float]:
        if not self.available:
            return {}
        out: dict[str, float] = {}
        for name, pid in self._pids.items():
            s = cpu_seconds(pid)
            if s is not None:
                out[name] = s
        return out


def per_request_ms(cpu_s: dict[str, float], requests: int) -> dict[str, float]:
    """CPU-ms per request of each process, and their `total`."""
    if requests <= 0:
        return {}
    out = {name: 1000.0 * s / requests for name, s in sorted(cpu_s.items())}
    out["total"] = sum(out.values())
    return out
