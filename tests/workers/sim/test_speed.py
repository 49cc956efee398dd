"""``--speed X`` runs X times faster than the profile: client-measured times follow the engine."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.workers.sim.process import running_sim
from workers.engine import Engine, EngineConfig, EngineRequest, LatencyModel, load_profile
from workers.engine.replay import replay
from workers.sim.tokens import count_tokens

PROMPT = "hello world"
N_OUT = 100


def engine_times(speed: float) -> tuple[float, float]:
    """TTFT and e2e of one request alone on a fresh tiny-cpu engine (seed 0), in virtual time."""
    profile = load_profile("tiny-cpu")
    engine = Engine(LatencyModel(profile, speed), EngineConfig.from_profile(profile), seed=0)
    req = EngineRequest("0", count_tokens(PROMPT), N_OUT, 0, 0.0)
    steps = list(replay(engine, [(0.0, req)]))
    first = next(s.end for s in steps if any(t.first for t in s.tokens))
    return first, steps[-1].end


def client_times(root: str, n_out: int = N_OUT) -> tuple[float, float, int]:
    body = {"prompt": PROMPT, "max_tokens": n_out, "ignore_eos": True, "stream": True}
    t0 = time.monotonic()
    ttft = 0.0
    chunks = 0
    with httpx.stream("POST", f"{root}/v1/completions", json=body, timeout=30) as resp:
        for line in resp.iter_lines():
            if line.startswith("data: {"):
                chunks += 1
                ttft = ttft or time.monotonic() - t0
    return ttft, time.monotonic() - t0, chunks


@pytest.mark.parametrize("speed", [1.0, 4.0])
def test_speed_factor_is_honoured(speed: float) -> None:
    want_ttft, want_e2e = engine_times(speed)
    with running_sim("--speed", str(speed)) as sim:
        ttft, e2e, chunks = client_times(sim.root)
        reported_e2e = sim.metric("vllm:e2e_request_latency_seconds_sum")
        reported_ttft = sim.metric("vllm:time_to_first_token_seconds_sum")
    assert chunks == N_OUT
    # the server reports the engine's own timeline, in wall seconds
    assert reported_e2e == pytest.approx(want_e2e, rel=1e-6)
    assert reported_ttft == pytest.approx(want_ttft, rel=1e-6)
    # and the client sees it: HTTP and a busy machine add a little, never remove any
    assert want_e2e - 0.005 <= e2e <= want_e2e * 1.25 + 0.15
    assert ttft <= want_ttft + 0.15


def test_speeds_scale_client_time() -> None:
    with running_sim("--speed", "1") as slow, running_sim("--speed", "5") as fast:
        e2e_slow = client_times(slow.root, 300)[1]
        e2e_fast = client_times(fast.root, 300)[1]
    assert 3.5 <= e2e_slow / e2e_fast <= 6.0
