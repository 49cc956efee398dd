"""A client that goes away aborts its request in the engine, which frees its KV at once."""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx
import pytest

from tests.workers.sim.process import SimServer, running_sim

LONG = {"prompt": "tell me everything", "max_tokens": 1500, "ignore_eos": True}


def wait_until(check: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.05)


def running(sim: SimServer) -> float:
    return sim.metric("vllm:num_requests_running", model_name=sim.model)


def kv_usage(sim: SimServer) -> float:
    return sim.metric("vllm:kv_cache_usage_perc", model_name=sim.model)


@pytest.fixture(scope="module")
def sim() -> object:
    with running_sim("--speed", "1") as server:
        yield server


def test_stream_disconnect_aborts(sim: SimServer) -> None:
    aborted = sim.metric("vllm:request_success_total", finished_reason="abort")
    with httpx.stream("POST", f"{sim.root}/v1/completions", json={**LONG, "stream": True}) as r:
        lines = r.iter_lines()  # kept open: closing the iterator closes the connection
        tokens = 0
        while tokens < 3:
            tokens += next(lines).startswith("data: {")
        assert running(sim) == 1 and kv_usage(sim) > 0
    wait_until(lambda: running(sim) == 0)
    assert kv_usage(sim) == 0
    assert sim.metric("vllm:request_success_total", finished_reason="abort") == aborted + 1


def test_non_stream_disconnect_aborts(sim: SimServer) -> None:
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{sim.root}/v1/completions", json=LONG, timeout=0.5)
    wait_until(lambda: running(sim) == 0)
    assert kv_usage(sim) == 0
