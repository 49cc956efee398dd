"""Scraping a real simulated worker's endpoints over HTTP (vLLM's names and shapes)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import aiohttp
import pytest
import uvicorn

from control_plane.scheduler.scrape import parse_metrics, scrape
from tests.support.ports import free_port
from workers.sim.app import create_app
from workers.sim.config import SimConfig

Asgi = Callable[..., Awaitable[None]]


async def _serving(app: Asgi) -> AsyncIterator[str]:
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, port=port, log_level="warning", lifespan="off"))
    task = asyncio.create_task(server.serve())
    while True:  # uvicorn offers a flag, not an event, for "listening"
        if server.started:
            break
        await asyncio.sleep(0.01)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    await task


@pytest.fixture
async def worker_url() -> AsyncIterator[str]:
    async for url in _serving(create_app(SimConfig(profile="tiny-cpu", speed=100.0))):
        yield url


async def test_scrape_sim_worker(worker_url: str) -> None:
    async with aiohttp.ClientSession() as session:
        sample = await scrape(session, worker_url)
    assert sample.healthy and sample.models is not None
    assert list(sample.models) == ["tiny-llama"] and sample.models["tiny-llama"] == 2048
    assert sample.running == 0 and sample.kv_usage == 0.0
    assert sample.kv_tokens is not None and sample.kv_tokens > 0


async def _not_vllm(
    scope: dict[str, object], receive: object, send: Callable[..., Awaitable[None]]
) -> None:
    body = b"<html>not a model list</html>"
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": body})


async def test_a_worker_answering_something_else_is_unhealthy_with_the_reason() -> None:
    async for url in _serving(_not_vllm):
        async with aiohttp.ClientSession() as session:
            sample = await scrape(session, url)
        assert not sample.healthy and sample.error and "/v1/models" in sample.error


def test_parse_sums_label_sets_and_reads_capacity() -> None:
    text = "\n".join(
        [
            "# TYPE vllm:num_requests_running gauge",
            'vllm:num_requests_running{engine="0",model_name="m"} 3.0',
            'vllm:num_requests_running{engine="1",model_name="m"} 2.0',
            'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.5',
            'vllm:cache_config_info{block_size="16",num_gpu_blocks="100"} 1.0',
            'vllm:e2e_request_latency_seconds_bucket{le="1.0"} 9.0',
        ]
    )
    assert parse_metrics(text) == {"running": 5.0, "kv_usage": 0.5, "kv_tokens": 1600}


async def test_unreachable_worker_is_unhealthy() -> None:
    async with aiohttp.ClientSession() as session:
        sample = await scrape(session, "http://127.0.0.1:9", limit_s=0.5)
    assert not sample.healthy and sample.error


async def test_a_worker_that_does_not_answer_in_time_is_unhealthy() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(5)

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with aiohttp.ClientSession() as session:
        sample = await scrape(session, f"http://127.0.0.1:{port}", limit_s=0.3)
    server.close()
    assert not sample.healthy and sample.error and "Timeout" in sample.error
