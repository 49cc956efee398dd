"""`arbiter bench overhead --profile DIR`: flame graphs and Redis command costs of one round.

While the profiled round runs, `py-spy record` samples every process on the path (gateway,
schedulers, recorder, and this load generator) and writes one SVG each under DIR; Redis's
`INFO commandstats` is read before and after, and the difference (calls, µs per call, total
ms per command) is written to `DIR/redis-commandstats.json`. py-spy is in the `dev` extras.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

from control_plane.state.server_stats import command_stats

PROFILED = ("gateway", "scheduler-0", "scheduler-1", "recorder")


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
        exe = shutil.which("py-spy")
        if exe is None:
            raise RuntimeError("py-spy is not installed (pip install -e '.[dev]')")
        self._dir.mkdir(parents=True, exist_ok=True)
        self._before = self._commandstats()
        for name, pid in self._pids.items():
            argv = [exe, "record", "--pid", str(pid), "--rate", "200", "--nonblocking"]
            argv += ["--output", str(self._dir / f"{name}.svg")]
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
        return {"dir": str(self._dir), "redis_commandstats": diff}

    def _commandstats(self) -> dict[str, dict[str, float]]:
        return asyncio.run(command_stats(self._redis_url))


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


def _dumps(rows: list[dict[str, Any]]) -> str:
    import json

    return json.dumps(rows, indent=1) + "\n"
