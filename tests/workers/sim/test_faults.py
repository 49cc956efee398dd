"""Fault injection: failure rate, dying after N streamed tokens, stalling mid-stream."""

from __future__ import annotations

import itertools
import time
from typing import Any

import httpx
import pytest

from tests.workers.sim.process import running_sim
from workers.sim.app import create_app
from workers.sim.config import SimConfig
from workers.sim.worker import DIE_EXIT_CODE

BODY: dict[str, Any] = {"prompt": "go", "max_tokens": 30, "ignore_eos": True}


def test_fail_rate_one_answers_500_before_any_token() -> None:
    with running_sim("--speed", "100", "--fail-rate", "1") as sim:
        for stream in (False, True):
            resp = httpx.post(f"{sim.root}/v1/completions", json={**BODY, "stream": stream})
            assert resp.status_code == 500
            err = resp.json()["error"]
            assert err["type"] == "InternalServerError" and err["code"] == 500
        assert sim.metric("vllm:generation_tokens_total") == 0


async def failures(seed: int, rate: float, n: int = 40) -> list[int]:
    app = create_app(SimConfig(speed=1000, seed=seed, fail_rate=rate))
    out = []
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://s") as c:
        for i in range(n):
            resp = await c.post("/v1/completions", json={**BODY, "max_tokens": 2})
            if resp.status_code == 500:
                out.append(i)
            else:
                assert resp.status_code == 200
    return out


async def test_fail_rate_is_seeded() -> None:
    failed = await failures(seed=3, rate=0.5)
    assert 5 < len(failed) < 35
    assert failed == await failures(seed=3, rate=0.5)
    assert failed != await failures(seed=4, rate=0.5)
    assert await failures(seed=3, rate=0.0) == []


def test_die_after_tokens_exits_mid_stream() -> None:
    with running_sim("--speed", "20", "--die-after-tokens", "10") as sim:
        received = 0
        with (
            pytest.raises(httpx.RemoteProtocolError),
            httpx.stream("POST", f"{sim.root}/v1/completions", json={**BODY, "stream": True}) as r,
        ):
            for line in r.iter_lines():
                received += line.startswith("data: {")
        assert sim.proc.wait(10) == DIE_EXIT_CODE
    assert 0 < received <= 10


def test_stall_pauses_every_stream_once() -> None:
    with running_sim("--speed", "50", "--stall-after-tokens", "5", "--stall-s", "0.8") as sim:
        stamps = []
        with httpx.stream("POST", f"{sim.root}/v1/completions", json={**BODY, "stream": True}) as r:
            for line in r.iter_lines():
                if line.startswith("data: {"):
                    stamps.append(time.monotonic())
        gaps = [b - a for a, b in itertools.pairwise(stamps)]
        assert len(stamps) == 30
        assert max(gaps) >= 0.7
        assert gaps.index(max(gaps)) == 4  # after the 5th token
        t0 = time.monotonic()
        resp = httpx.post(f"{sim.root}/v1/completions", json=BODY)
        assert resp.json()["usage"]["completion_tokens"] == 30
        assert time.monotonic() - t0 < 0.5  # only once
