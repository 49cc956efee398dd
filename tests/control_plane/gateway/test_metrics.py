"""Gateway metrics: one process's own series, or, in a group of processes sharing a port, the
sum over the group from whichever process is asked (prometheus_client's multiprocess mode,
chosen when the process starts, so each process here is a real subprocess)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from fastapi import FastAPI
from starlette.requests import Request

from control_plane.contracts.events import WorkerFailed
from control_plane.gateway.errors import ApiError, error_response, given_up
from control_plane.gateway.metrics import MULTIPROCESS_ENV, GatewayMetrics
from control_plane.state import StateUnavailable

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


def test_failures_are_counted_once_where_they_arise() -> None:
    """`arbiter_gateway_failed` counts Redis or the scheduler unavailable and internal errors;
    a queue timeout and a request given up for want of a leader are counted as withdrawn, a
    worker failure as a request finished with `error` — not here a second time."""
    app = FastAPI()
    app.state.metrics = metrics = GatewayMetrics()
    scope = {"type": "http", "app": app, "method": "POST", "path": "/v1/x", "headers": []}
    request = Request({**scope, "query_string": b"", "server": ("gw", 80), "scheme": "http"})
    no_leader = ApiError(503, "no leader", code="scheduler_unavailable")
    for exc in (
        StateUnavailable("down"),
        ApiError(503, "no leader at the door", code="scheduler_unavailable"),
        RuntimeError("a bug"),
        ApiError(502, "worker", code="worker_failed"),
        ApiError(400, "bad", code="invalid_value"),
    ):
        error_response(exc, request)
    for reason in ("queue_timeout", "no_leader"):
        with pytest.raises(ApiError) as raised:
            given_up(reason, 1.0, no_leader, "req-7")
        answer = error_response(raised.value, request)
        assert answer.status_code in (503, 504)
        assert answer.headers["X-Arbiter-Request-Id"] == "req-7"  # the row's id

    def failed(code: str) -> float | None:
        return metrics.registry.get_sample_value("arbiter_gateway_failed_total", {"code": code})

    assert failed("state_unavailable") == 1.0
    assert failed("scheduler_unavailable") == 1.0  # the door's; not the one given up
    assert failed("internal_error") == 1.0
    assert failed("worker_failed") is None and failed("queue_timeout") is None
