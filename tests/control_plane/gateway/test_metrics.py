"""Gateway metrics: one process's own series, or, in a group of processes sharing a port, the
sum over the group from whichever process is asked (prometheus_client's multiprocess mode,
chosen when the process starts, so each process here is a real subprocess)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from control_plane.contracts.events import WorkerFailed
from control_plane.gateway.metrics import MULTIPROCESS_ENV, GatewayMetrics

# Counts argv[1] refusals, then prints what /metrics would serve.
SCRIPT = """
import sys
from prometheus_client import generate_latest
from control_plane.gateway.metrics import GatewayMetrics
m = GatewayMetrics()
for _ in range(int(sys.argv[1])):
    m.refused("queue_full")
sys.stdout.write(generate_latest(m.registry).decode())
"""
ROOT = Path(__file__).resolve().parents[3]


def _process(n: int, env: dict[str, str]) -> str:
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, str(n)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env=env,
        timeout=60,
    ).stdout


def _refused(text: str) -> float:
    for line in text.splitlines():
        if line.startswith('arbiter_gateway_rejected_total{reason="queue_full"}'):
            return float(line.split()[-1])
    return 0.0


def test_alone_a_gateway_exposes_its_own_series() -> None:
    metrics = GatewayMetrics()
    metrics.refused("queue_full")
    sample = metrics.registry.get_sample_value(
        "arbiter_gateway_rejected_total", {"reason": "queue_full"}
    )
    assert sample == 1.0


def test_in_a_group_any_process_answers_for_all(tmp_path: Path) -> None:
    import os

    base = {k: v for k, v in os.environ.items() if k != MULTIPROCESS_ENV}
    group = {**base, MULTIPROCESS_ENV: str(tmp_path)}
    assert _refused(_process(2, group)) == 2.0
    assert _refused(_process(3, group)) == 5.0  # its own 3 and the first process's 2
    assert _refused(_process(0, group)) == 5.0  # a process that counted nothing sees the group
    assert _refused(_process(4, base)) == 4.0  # outside the group: its own only


def test_a_dropped_event_is_counted_by_its_type() -> None:
    metrics = GatewayMetrics()
    metrics.dropped(WorkerFailed("r1", "w1", "boom", 1.0))
    sample = metrics.registry.get_sample_value(
        "arbiter_gateway_events_dropped_total", {"type": "WorkerFailed"}
    )
    assert sample == 1.0
