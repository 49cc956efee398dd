"""`arbiter bench overhead --profile DIR`: CPU profiles and Redis command costs of one round.

While the profiled round runs, `py-spy record` samples every process on the path (gateway,
schedulers, recorder, and this load generator) at `RATE_HZ` and writes each one's collapsed
stacks to `DIR/<process>.txt` (the input of flame graph tools: speedscope, inferno,
flamegraph.pl); `DIR/cpu.json` sums them per process — CPU seconds sampled and the functions
with the most samples of their own — so the CPU each process spends per request is printed,
not eyeballed. Redis's `INFO commandstats` is read before and after, and the difference
(calls, µs per call, total ms per command) is written to `DIR/redis-commandstats.json`.
py-spy is in the `dev` extras.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from control_plane.state.server_stats import command_stats

PROFILED = ("gateway", "scheduler-0", "scheduler-1", "recorder")
RATE_HZ = 200
TOP = 25


def _profiled(name: str) -> bool:
    """The processes sampled: those of `PROFILED`, and every gateway process of a group."""
    return name in PROFILED or name.startswith("gateway-")


class Profiler:
    """Samples the deployment's processes between `start()` and `stop()`."""

    def __init__(self, out_dir: Path, pids: dict[str, int | None], redis_url: str) -> None:
        self._dir = out_dir
        self._pids = {name: pid for name, pid in pids.items() if pid and _profiled(name)}
        self._pids["loadgen"] = os.getpid()
        self._redis_url = redis_url
        self._procs: list[subprocess.Popen[bytes]] = []
        self._before: dict[str, dict[str, float]] = {}

    def start(self) -> None:
        # the virtual environment's own, also when its bin/ is not on PATH
        venv_bin = str(Path(sys.executable).parent)
        exe = shutil.which("py-spy") or shutil.which("py-spy", path=venv_bin)
        if exe is None:
            raise RuntimeError("py-spy is not installed (pip install -e '.[dev]')")
        self._dir.mkdir(parents=True, exist_ok=True)
        self._before = self._commandstats()
        for name, pid in self._pids.items():
            argv = [exe, "record", "--pid", str(pid), "--rate", str(RATE_HZ), "--nonblocking"]
            argv += ["--format", "raw", "--output", str(self._dir / f"{name}.txt")]
            log = (self._dir / f"{name}.py-spy.log").open("wb")
            self._procs.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT))

    def stop(self) -> dict[str, Any]:
        """End the recordings (py-spy writes its SVG on SIGINT); the Redis difference."""
        for proc in self._procs:
            proc.send_signal(signal.SIGINT)
        for proc in self._procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        diff = commandstats_diff(self._before, self._commandstats())
        (self._dir / "redis-commandstats.json").write_text(_dumps(diff))
        cpu = {name: cpu_of(self._dir / f"{name}.txt") for name in self._pids}
        (self._dir / "cpu.json").write_text(_dumps(cpu))
        return {"dir": str(self._dir), "redis_commandstats": diff, "cpu": cpu}

    def _commandstats(self) -> dict[str, dict[str, float]]:
        return asyncio.run(command_stats(self._redis_url))


def cpu_of(stacks: Path) -> dict[str, Any]:
    """One process's collapsed stacks summed: CPU seconds sampled (py-spy counts running
    threads only) and the `TOP` frames by samples of their own, with their share."""
    if not stacks.exists():
        return {"cpu_s": 0.0, "samples": 0, "top_self": []}
    own: Counter[str] = Counter()
    for line in stacks.read_text().splitlines():
        frames, _, count = line.rpartition(" ")
        if count.isdigit():
            own[frames.rpartition(";")[2]] += int(count)
    total = sum(own.values())
    top = [{"frame": f, "share": n / total} for f, n in own.most_common(TOP)]
    return {"cpu_s": total / RATE_HZ, "samples": total, "top_self": top}


def commandstats_diff(
    before: dict[str, dict[str, float]], after: dict[str, dict[str, float]]
) -> list[dict[str, Any]]:
    """Per command: calls and time spent between the two readings, costliest first."""
    rows = []
    for name, now in after.items():
        was = before.get(name, {"calls": 0.0, "usec": 0.0})
        calls, usec = now["calls"] - was["calls"], now["usec"] - was["usec"]
        if calls > 0:
            rows.append(
                {"command": name, "calls": int(calls), "total_ms": usec / 1e3,
                 "usec_per_call": usec / calls}
            )  # fmt: skip
    return sorted(rows, key=lambda r: -float(r["total_ms"]))


def _dumps(rows: Any) -> str:
    import json

    return json.dumps(rows, indent=1) + "\n"
