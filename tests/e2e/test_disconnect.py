"""Client disconnects: a queued request leaves the queue; a streaming one is aborted upstream."""

from __future__ import annotations

import asyncio
import time

import httpx

from control_plane.scheduler.scrape import parse_metrics
from control_plane.state import StateStores
from tests.support.cluster import Cluster

LONG = {
    "model": "tiny-llama",
    "prompt": "tell me a long story",
    "max_tokens": 1500,
    "ignore_eos": True,
    "stream": True,
}


async def _running(worker_url: str) -> float:
    async with httpx.AsyncClient() as client:
        text = (await client.get(f"{worker_url}/metrics")).text
    return float(parse_metrics(text).get("running") or 0.0)


async def _queued(cluster: Cluster) -> list[str]:
    stores = StateStores.open(cluster.redis_url, cluster.cluster)
    try:
        return await stores.requests.queued_ids()
    finally:
        await stores.aclose()


async def _wait(predicate_coro: object, limit_s: float) -> float:
    start = time.monotonic()
    while time.monotonic() - start < limit_s:
        if await predicate_coro():  # type: ignore[operator]
            return time.monotonic() - start
        await asyncio.sleep(0.05)
    raise AssertionError(f"condition not met within {limit_s}s")


def _one_slot(cluster: Cluster) -> tuple[str, str, dict[str, str]]:
    """A worker with one slot, a scheduler and a gateway: (worker URL, gateway URL, headers)."""
    keys = cluster.tenants(["t"])
    cluster.start_worker(speed=1.0, max_num_seqs=1)
    cluster.start_scheduler()
    url = cluster.start_gateway()
    return cluster.workers[0]["url"], url, {"Authorization": f"Bearer {keys['t']}"}


def test_disconnects(cluster: Cluster) -> None:
    worker, url, h = _one_slot(cluster)

    async def scenario() -> tuple[float, float]:
        async with httpx.AsyncClient(timeout=60) as holder:
            async with holder.stream(
                "POST", f"{url}/v1/completions", json=LONG, headers=h
            ) as running:
                lines = running.aiter_lines()
                await lines.__anext__()  # streaming: the only slot is taken
                waiting = asyncio.create_task(
                    httpx.AsyncClient(timeout=60).post(
                        f"{url}/v1/completions", json={**LONG, "stream": False}, headers=h
                    )
                )
                await _wait(lambda: _has_queued(cluster), 5)
                waiting.cancel()  # the queued client goes away
                left_queue = await _wait(lambda: _queue_empty(cluster), 1.0)
                assert await _running(worker) == 1
            # leaving the `stream` block closes the streaming client's connection
            aborted = await _wait(lambda: _idle(worker), 1.0)
        return left_queue, aborted

    left_queue, aborted = asyncio.run(scenario())
    print(
        f"\nqueued request withdrawn after {left_queue:.2f}s; stream aborted after {aborted:.2f}s"
    )


async def _has_queued(cluster: Cluster) -> bool:
    return len(await _queued(cluster)) == 1


async def _queue_empty(cluster: Cluster) -> bool:
    return not await _queued(cluster)


async def _idle(worker: str) -> bool:
    return await _running(worker) == 0


def test_a_collected_answer_is_aborted_when_its_client_leaves(cluster: Cluster) -> None:
    """`stream: false`: the gateway collects the whole answer before it sends anything. A
    client that leaves meanwhile frees the worker at once (before, the worker generated the
    whole answer for nobody and the request was recorded `ok`)."""
    worker, url, h = _one_slot(cluster)

    async def scenario() -> float:
        async with httpx.AsyncClient(timeout=60) as client:
            collected = asyncio.create_task(
                client.post(f"{url}/v1/completions", json={**LONG, "stream": False}, headers=h)
            )
            await _wait(lambda: _busy(worker), 10)
            collected.cancel()  # the client goes away while its answer is being collected
            return await _wait(lambda: _idle(worker), 1.0)

    aborted = asyncio.run(scenario())
    print(f"\ncollected answer aborted after {aborted:.2f}s")


async def _busy(worker: str) -> bool:
    return await _running(worker) == 1
