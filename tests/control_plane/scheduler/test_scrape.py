"""Scraping a real simulated worker's endpoints over HTTP (vLLM's names and shapes)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import pytest

from control_plane.contracts.workers import WorkerSample
from control_plane.scheduler.scrape import parse_metrics, scrape
from tests.support.asgi_server import serving
from workers.sim.app import create_app
from workers.sim.config import SimConfig

Asgi = Callable[..., Awaitable[None]]
MODELS = b'{"object":"list","data":[{"id":"m","max_model_len":64}]}'
METRICS = b'vllm:num_requests_running{model_name="m"} 1.0\n'


def _answering(routes: dict[str, tuple[int, bytes, list[tuple[bytes, bytes]]]]) -> Asgi:
    """A server that answers each path as given, and 404 elsewhere."""

    async def app(
        scope: dict[str, Any], receive: Any, send: Callable[..., Awaitable[None]]
    ) -> None:
        status, body, headers = routes.get(scope["path"], (404, b"", []))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return app


async def _scrape_app(app: Asgi) -> WorkerSample:
    async with serving(app) as url, aiohttp.ClientSession() as session:
        return await scrape(session, url)


async def test_scrape_sim_worker() -> None:
    sample = await _scrape_app(create_app(SimConfig(profile="tiny-cpu", speed=100.0)))
    assert sample.healthy and sample.models is not None
    assert list(sample.models) == ["tiny-llama"] and sample.models["tiny-llama"] == 2048
    assert sample.running == 0 and sample.kv_usage == 0.0
    assert sample.kv_tokens is not None and sample.kv_tokens > 0


@pytest.mark.parametrize(
    ("routes", "reason"),
    [
        ({"/v1/models": (200, b"<html>not a model list</html>", [])}, "/v1/models: not a model"),
        ({"/v1/models": (500, b'{"detail":"boom"}', [])}, "/v1/models answered 500"),
        (
            {
                "/v1/models": (200, MODELS, []),
                "/metrics": (200, b"vllm:num_requests_running x\n", []),
            },
            "/metrics: not Prometheus",
        ),
        ({"/v1/models": (200, MODELS, []), "/metrics": (503, b"", [])}, "/metrics answered 503"),
    ],
)
async def test_a_worker_answering_otherwise_than_vllm_is_unhealthy_with_the_reason(
    routes: dict[str, tuple[int, bytes, list[tuple[bytes, bytes]]]], reason: str
) -> None:
    sample = await _scrape_app(_answering({"/health": (200, b"", []), **routes}))
    assert not sample.healthy and sample.error and sample.error.startswith(reason), sample.error


async def test_a_redirected_health_check_is_not_followed() -> None:
    moved = [(b"location", b"/elsewhere")]
    sample = await _scrape_app(
        _answering({"/health": (307, b"", moved), "/elsewhere": (200, b"", [])})
    )
    assert not sample.healthy and sample.error == "/health answered 307"


async def test_a_healthy_answer_without_models_is_healthy_with_none() -> None:
    routes: dict[str, tuple[int, bytes, list[tuple[bytes, bytes]]]] = {
        "/health": (200, b"", []),
        "/v1/models": (200, b'{"object":"list"}', []),
        "/metrics": (200, METRICS, []),
    }
    sample = await _scrape_app(_answering(routes))
    assert sample.healthy and sample.models == {} and sample.running == 1.0


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


def test_the_kv_fraction_is_counted_once_per_name_and_averaged_over_engines() -> None:
    """vLLM 0.9 exports the KV fraction under both names, and a data-parallel server one series
    per engine: a fraction is not a count, so 0.5 everywhere is 0.5 (before: 1.5, and a worker
    half full refused by `capacity` admission's 0.95)."""
    text = "\n".join(
        [
            'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.5',
            'vllm:gpu_cache_usage_perc{engine="0",model_name="m"} 0.5',
            'vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.3',
        ]
    )
    assert parse_metrics(text) == {"kv_usage": pytest.approx(0.4)}
    old_only = 'vllm:gpu_cache_usage_perc{engine="0",model_name="m"} 0.25'
    assert parse_metrics(old_only) == {"kv_usage": 0.25}


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:9", "http://w1..local:8000", f"http://{'a' * 64}.example:8000", ""]
)
async def test_a_worker_that_cannot_be_reached_is_unhealthy(url: str) -> None:
    async with aiohttp.ClientSession() as session:
        sample = await scrape(session, url, limit_s=0.5)
    assert not sample.healthy and sample.error and sample.error.startswith("/health: ")


async def test_a_worker_that_does_not_answer_in_time_is_unhealthy() -> None:
    held: list[asyncio.StreamWriter] = []

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)  # accepted, never answered

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with aiohttp.ClientSession() as session:
        sample = await scrape(session, f"http://127.0.0.1:{port}", limit_s=0.3)
    for writer in held:
        writer.close()
    server.close()
    await server.wait_closed()
    assert not sample.healthy and sample.error and sample.error.startswith("/health: Timeout")


async def test_the_scrape_loop_turns_any_failure_into_an_unhealthy_sample(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from control_plane.scheduler import scrape as module

    async def broken(session: aiohttp.ClientSession, url: str) -> WorkerSample:
        raise RuntimeError("a bug in one worker's scrape")

    monkeypatch.setattr(module, "scrape", broken)
    async with aiohttp.ClientSession() as session:
        sample = await module.scrape_or_unhealthy(session, "http://w")
    assert not sample.healthy and sample.error == "RuntimeError: a bug in one worker's scrape"
