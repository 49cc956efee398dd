"""``/metrics`` moves with the work done: gauges while running, counters and histograms after."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.workers.sim.process import metric
from workers.sim.app import SimApp, create_app
from workers.sim.config import SimConfig
from workers.sim.tokens import count_tokens


def client_for(app: SimApp) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sim")


async def scrape(client: httpx.AsyncClient, name: str, **labels: str) -> float:
    return metric((await client.get("/metrics")).text, name, **labels)


@pytest.fixture
async def slow() -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(create_app(SimConfig(speed=1, max_num_seqs=1))) as c:
        yield c


async def test_gauges_follow_running_and_waiting(slow: httpx.AsyncClient) -> None:
    body: dict[str, Any] = {"prompt": "x", "max_tokens": 100, "ignore_eos": True}
    tasks = [asyncio.create_task(slow.post("/v1/completions", json=body)) for _ in range(3)]
    for _ in range(100):  # until all three are in (the first runs for ~0.4 s)
        if await scrape(slow, "vllm:num_requests_waiting") == 2:
            break
        await asyncio.sleep(0.01)
    assert await scrape(slow, "vllm:num_requests_running") == 1
    assert await scrape(slow, "vllm:num_requests_waiting") == 2
    assert 0 < await scrape(slow, "vllm:kv_cache_usage_perc") < 1
    await asyncio.gather(*tasks)
    assert await scrape(slow, "vllm:num_requests_running") == 0
    assert await scrape(slow, "vllm:num_requests_waiting") == 0
    assert await scrape(slow, "vllm:kv_cache_usage_perc") == 0
    queue = await scrape(slow, "vllm:request_queue_time_seconds_sum")
    assert queue > 0.1  # the second and third waited for ~40 steps each


async def test_counters_and_histograms_after_requests() -> None:
    prompts = ["one", "two words", "three more words"]
    async with client_for(create_app(SimConfig(speed=200))) as c:
        for i, p in enumerate(prompts):
            body = {"prompt": p, "max_tokens": 5 + i, "ignore_eos": True}
            assert (await c.post("/v1/completions", json=body)).status_code == 200
        text = (await c.get("/metrics")).text
    assert metric(text, "vllm:prompt_tokens_total") == sum(count_tokens(p) for p in prompts)
    assert metric(text, "vllm:generation_tokens_total") == 5 + 6 + 7
    for name in ("time_to_first_token", "e2e_request_latency", "request_queue_time"):
        assert metric(text, f"vllm:{name}_seconds_count") == 3
    assert metric(text, "vllm:inter_token_latency_seconds_count") == 4 + 5 + 6
    assert metric(text, "vllm:request_success_total", finished_reason="length") == 3
    assert metric(text, "vllm:request_generation_tokens_sum") == 18


async def test_kv_exhaustion_preempts_and_still_completes() -> None:
    app = create_app(SimConfig(speed=5, kv_tokens=128))
    body: dict[str, Any] = {"prompt": "a b c d e f g h", "max_tokens": 50, "ignore_eos": True}
    async with client_for(app) as c:
        answers = await asyncio.gather(*(c.post("/v1/completions", json=body) for _ in range(6)))
        text = (await c.get("/metrics")).text
    assert all(a.json()["usage"]["completion_tokens"] == 50 for a in answers)
    assert metric(text, "vllm:num_preemptions_total") > 0
    info = [line for line in text.splitlines() if line.startswith("vllm:cache_config_info{")]
    assert 'num_gpu_blocks="8"' in info[0] and 'block_size="16"' in info[0]
