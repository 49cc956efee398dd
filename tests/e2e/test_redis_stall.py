"""Redis paused (SIGSTOP) for 8 s under streaming load: nothing hangs, a leader leads again.

Regression: the leader used to lose its lease during the stall and never lead again (its tasks
ignored their cancellation), while waiting requests hung without an answer and `/readyz` said
ready. Now every request ends (served, or 503 + Retry-After in OpenAI's shape), `/readyz` says
503 during the stall, a leader holds the lease again with a new fencing token within a bound,
and new requests are served.
"""

from __future__ import annotations

import asyncio
import collections
import os
import signal
import time
from typing import Any

import httpx
import redis

from control_plane.bench.off_loop import off_loop
from tests.support.cluster import Cluster
from tests.support.redis_server import RedisServer

N_REQUESTS = 160
CONCURRENCY = 32
CLIENT_BOUND_S = 45.0
"""Longer than any legitimate answer here (the stall, the 503 bound, a served stream)."""
PAUSE_S = 8.0
SERVED_BEFORE_PAUSE = 8
RELEAD_BOUND_S = 10.0


async def _stream(client: httpx.AsyncClient, url: str, key: str, i: int) -> dict[str, Any]:
    body = {
        "model": "tiny-llama",
        "prompt": f"stall {i}",
        "max_tokens": 16,
        "ignore_eos": True,
        "stream": True,
    }
    h = {"Authorization": f"Bearer {key}"}
    async with client.stream("POST", f"{url}/v1/completions", json=body, headers=h) as resp:
        raw = b"".join([chunk async for chunk in resp.aiter_bytes()])
    return {"status": resp.status_code, "headers": resp.headers, "body": raw.decode()}


async def _one(url: str, key: str, i: int, client: httpx.AsyncClient) -> dict[str, Any]:
    try:
        return await asyncio.wait_for(_stream(client, url, key, i), timeout=CLIENT_BOUND_S)
    except (TimeoutError, httpx.TimeoutException):
        return {"status": "hung"}


async def _load(
    url: str, keys: list[str], done: list[int], served: asyncio.Event
) -> list[dict[str, Any]]:
    """Every request, CONCURRENCY at a time; `done[0]` counts the ones that have ended and
    `served` is set once SERVED_BEFORE_PAUSE have."""
    gate = asyncio.Semaphore(CONCURRENCY)
    timeout = httpx.Timeout(CLIENT_BOUND_S)
    async with httpx.AsyncClient(timeout=timeout, limits=httpx.Limits(max_connections=64)) as c:

        async def run(i: int) -> dict[str, Any]:
            async with gate:
                result = await _one(url, keys[i % len(keys)], i, c)
            done[0] += 1
            if done[0] >= SERVED_BEFORE_PAUSE:
                served.set()
            return result

        return await asyncio.gather(*(run(i) for i in range(N_REQUESTS)))


async def _readiness_during(url: str, seconds: float) -> list[int | str]:
    seen: list[int | str] = []
    deadline = time.monotonic() + seconds
    async with httpx.AsyncClient(timeout=3.0) as client:
        while time.monotonic() < deadline:
            try:
                seen.append((await client.get(f"{url}/readyz")).status_code)
            except httpx.HTTPError as exc:
                seen.append(type(exc).__name__)  # a probe that hangs counts as not a 503
            await asyncio.sleep(0.5)
    return seen


def _leader(client: redis.Redis, cluster: str) -> tuple[str | None, int]:
    holder = client.get(f"arb:{{{cluster}}}:leader")
    token = client.get(f"arb:{{{cluster}}}:leader:epoch")
    return (None if holder is None else str(holder), int(token or 0))


def _wait_for_leader(client: redis.Redis, cluster: str, after_token: int) -> float:
    started = time.monotonic()
    while time.monotonic() - started < RELEAD_BOUND_S:
        holder, token = _leader(client, cluster)
        if holder is not None and token > after_token:
            return time.monotonic() - started
        time.sleep(0.1)
    raise AssertionError(f"no new leader within {RELEAD_BOUND_S}s: {_leader(client, cluster)}")


def test_redis_paused_under_streaming_load_hangs_nothing_and_a_leader_leads_again(
    cluster: Cluster, redis_server: RedisServer
) -> None:
    keys = cluster.tenants(["a", "b"])
    cluster.start_worker(speed=4.0, max_num_seqs=8)
    cluster.start_scheduler()
    url = cluster.start_gateway()
    probe = redis.Redis.from_url(redis_server.url, decode_responses=True, socket_timeout=5)
    for key in keys.values():  # each key seen valid once before the load
        assert _post(url, key).status_code == 200
    _, token_before = _leader(probe, cluster.cluster)
    assert token_before >= 1
    assert redis_server.proc is not None
    pid = redis_server.proc.pid

    async def scenario() -> tuple[list[dict[str, Any]], list[int | str], float]:
        done, served = [0], asyncio.Event()
        load = asyncio.create_task(_load(url, list(keys.values()), done, served))
        # Pause once streams have been served, with most of the load still to come (on a
        # fast machine a fixed delay let the whole load finish before the pause).
        await asyncio.wait_for(served.wait(), timeout=CLIENT_BOUND_S)
        assert done[0] < N_REQUESTS // 2, done
        os.kill(pid, signal.SIGSTOP)
        try:
            ready = await _readiness_during(url, PAUSE_S)
        finally:
            os.kill(pid, signal.SIGCONT)
        resumed = time.monotonic()
        relead_s = await off_loop(_wait_for_leader, probe, cluster.cluster, token_before)
        assert time.monotonic() - resumed < RELEAD_BOUND_S
        return await load, ready, relead_s

    results, ready, relead_s = asyncio.run(scenario())
    outcomes = collections.Counter(_outcome(r) for r in results)
    print(f"\noutcomes {dict(outcomes)}; readyz during pause {ready}; re-led in {relead_s:.1f}s")

    assert outcomes["hung"] == 0, outcomes  # (a) every request ended with an answer
    assert set(outcomes) <= {"ok", "503"}, outcomes
    for r in results:
        if r["status"] == 503:
            assert r["headers"].get("Retry-After"), r
    assert outcomes["ok"] > 0 and outcomes["503"] > 0, outcomes
    holder, token_after = _leader(probe, cluster.cluster)  # (b) a leader, with a new token
    assert holder is not None and token_after > token_before
    assert 503 in ready, ready  # (d) not ready while Redis was paused
    assert "ReadTimeout" not in ready, ready
    for i in range(6):  # (c) served again after recovery
        assert _post(url, keys["a" if i % 2 else "b"]).status_code == 200
    assert httpx.get(f"{url}/readyz", timeout=5).status_code == 200
    assert [c.name for c in cluster.children if not c.alive()] == []
    probe.close()


def _post(url: str, key: str) -> httpx.Response:
    body = {"model": "tiny-llama", "prompt": "after", "max_tokens": 4, "ignore_eos": True}
    deadline = time.monotonic() + 20
    while True:
        resp = httpx.post(
            f"{url}/v1/completions",
            json=body,
            headers={"Authorization": f"Bearer {key}"},
            timeout=30,
        )
        if resp.status_code != 503 or time.monotonic() > deadline:
            return resp
        time.sleep(0.5)


def _outcome(result: dict[str, Any]) -> str:
    status = result["status"]
    if status == "hung":
        return "hung"
    body = str(result["body"])
    if status == 200:
        return "ok" if body.rstrip().endswith("data: [DONE]") else "stream_error"
    if status == 503 and '"error"' in body and '"code"' in body:
        return "503"
    return f"{status}: {body[:120]}"
