"""Client disconnects: a queued request leaves the queue; a streaming one is aborted upstream."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from control_plane.scheduler.scrape import parse_metrics
from control_plane.state import StateStores
from storage.db import Database
from storage.records import RequestRecord
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


@pytest.mark.parametrize("fast_lane", [True, False])
def test_a_client_that_leaves_during_prefill_ends_its_request_aborted(
    cluster: Cluster, fast_lane: bool
) -> None:
    """The gateway reads the answer up to its first token before it answers the client (so a
    worker that dies in prefill can be retried). A client that leaves meanwhile still ends
    its request `aborted` and frees the worker at once: the prime is raced against the
    client's disconnect, on the fast lane from 50 ms into the prefill (regression: the fast
    lane had no watcher, so the worker was freed only at the first token, ~2 s later)."""
    cluster.extra_env["ARBITER_FAST_PATH"] = "true" if fast_lane else "false"
    keys = cluster.tenants(["t"])
    cluster.start_worker(speed=0.01, max_num_seqs=4)  # a 1,000-token prefill takes ~2.2 s
    cluster.start_scheduler()
    url = cluster.start_gateway()
    time.sleep(1.5)  # the leader has lent the idle slots (lane on)
    worker = cluster.workers[0]["url"]
    h = {"Authorization": f"Bearer {keys['t']}"}
    body = {**LONG, "prompt": list(range(1, 1001)), "max_tokens": 5}

    async def scenario() -> float:
        async with httpx.AsyncClient(timeout=60) as client:
            warm = await client.post(
                f"{url}/v1/completions",
                json={**LONG, "stream": False, "max_tokens": 1},
                headers={**h, "X-Arbiter-Debug-Timing": "1"},
            )
            # which lane this request takes too: slots are still lent, nothing is queued
            assert ("fast=1" in warm.headers["X-Arbiter-Timing"]) == fast_lane
            leaving = asyncio.create_task(
                client.post(f"{url}/v1/completions", json=body, headers=h)
            )
            await _wait(lambda: _busy(worker), 10)
            leaving.cancel()  # in prefill: the gateway has sent nothing yet
            return await _wait(lambda: _idle(worker), 5.0)

    freed = asyncio.run(scenario())
    print(f"\nworker freed {freed:.2f}s after the client left in prefill")
    assert freed < 1.0  # not at the first token, ~2 s later
    rows = [r for r in _rows(cluster, 2) if r.status != "ok"]  # the warm-up's is ok
    assert [(r.status, r.error) for r in rows] == [("aborted", "client disconnected")]


def _rows(cluster: Cluster, count: int) -> list[RequestRecord]:
    db = Database(cluster.db_url)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with db.reader() as r:
                rows = r.requests.list(limit=10)
            if len(rows) >= count:
                return rows
            time.sleep(0.2)
        return []
    finally:
        db.dispose()
