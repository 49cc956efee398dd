"""Faults injected mid-run into a real `arbiter up`: nothing hangs, nothing is lost or doubled,
and service comes back by itself.

Each fault gets its own deployment (`arbiter up`, exactly as operators start it), 200 streamed
chat completions from two tenants through 32 `openai` clients, and one fault once 30 % of them
have ended: kill -9 of a worker, of the scheduler leader, of the recorder, of the gateway, of
redis-server, or Redis frozen for 8 s. Explicit errors (HTTP 4xx/5xx, SSE error events, broken
connections) are allowed and counted; silent failures are not.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from rich.console import Console

from control_plane.bench.fault_bench import table
from control_plane.bench.fault_run import Scenario, run_fault
from control_plane.bench.faults import FAULTS
from control_plane.bench.up_process import UpConfig, UpProcess

SCENARIO = Scenario(requests=200, concurrency=32, max_tokens=48)
CONFIG = UpConfig(workers=2, speed=0.1)


@pytest.mark.timeout(420)
@pytest.mark.parametrize("name", list(FAULTS))
def test_fault_is_survived(name: str, tmp_path: Path) -> None:
    up = UpProcess.start(CONFIG, tmp_path / "up")
    try:
        result = asyncio.run(run_fault(up, FAULTS[name], SCENARIO))
        alive = up.alive()
    finally:
        up.stop()
    Console(width=160).print(table([result]))
    print(result.as_dict())
    assert result.problem == "" and result.injected, result.problem
    assert alive, up.log_tail()
    assert result.sent == SCENARIO.requests
    assert result.hung == 0 and result.incomplete == 0
    assert result.rows_expected > 0
    assert result.lost == 0 and result.duplicated == 0 and result.mismatched == 0
    assert result.recovered, (result.recovery_s, result.final_check, result.probes)
