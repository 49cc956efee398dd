"""Scraping a real simulated worker's endpoints (vLLM's names and shapes)."""

from __future__ import annotations

import httpx

from control_plane.scheduler.scrape import parse_metrics, scrape
from workers.sim.app import create_app
from workers.sim.config import SimConfig


async def test_scrape_sim_worker_in_process() -> None:
    app = create_app(SimConfig(profile="tiny-cpu", speed=100.0))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://w") as client:
        sample = await scrape(client, "http://w")
    assert sample.healthy and sample.models is not None
    assert list(sample.models) == ["tiny-llama"] and sample.models["tiny-llama"] == 2048
    assert sample.running == 0 and sample.kv_usage == 0.0
    assert sample.kv_tokens is not None and sample.kv_tokens > 0


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
    async with httpx.AsyncClient() as client:
        sample = await scrape(client, "http://127.0.0.1:9", limit_s=0.5)
    assert not sample.healthy and sample.error
