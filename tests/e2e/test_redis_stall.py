"""Redis paused (SIGSTOP) for 8 s under streaming load: nothing hangs, a leader leads again.

Regression: the leader used to lose its lease during the stall and never lead again (its tasks
ignored their cancellation), while waiting requests hung without an answer and `/readyz` said
ready. Now every request ends (served, or 503 + Retry-After in OpenAI's shape), `/readyz` says
503 during the stall, a leader holds the lease again with a new fencing token within a bound,
and new requests are served; once everything has ended nothing is left in flight.
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
from storage.db import Database
from tests.support.cluster import Cluster
from tests.support.redis_server import RedisServer

N_REQUESTS = 160
CONCURRENCY = 32
CLIENT_BOUND_S = 45.0
"""Longer than any legitimate answer here (the stall, the 503 bound, a served stream)."""
PAUSE_S = 8.0
SERVED_BEFORE_PAUSE = 8
RELEAD_BOUND_S = 10.0
IDLE_BOUND_S = 10.0
"""How long after the last answer the requests may still be in flight in Redis."""


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
    ready_after = httpx.get(f"{url}/readyz", timeout=5)
    assert ready_after.status_code == 200, ready_after.text
    assert [c.name for c in cluster.children if not c.alive()] == []
    assert _in_flight_after(probe, cluster.cluster, IDLE_BOUND_S) == {}  # (e) no slot kept
    probe.close()


def _in_flight_after(client: redis.Redis, cluster: str, bound_s: float) -> dict[str, str]:
    """What is still in flight once every request has ended (polled: marks run off the
    response path). A submit that timed out in the stall may still have run when Redis
    resumed; whatever it queued or took must end too."""
    deadline = time.monotonic() + bound_s
    while True:
        inflight: dict[str, str] = client.hgetall(f"arb:{{{cluster}}}:inflight")  # type: ignore[assignment]
        if not inflight or time.monotonic() > deadline:
            return inflight
        time.sleep(0.2)


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


LOST_SUBMITS = 4
LOST_BOUND_S = 16.0
"""How long the submits sent into the pause may take to fail (the gateway's socket timeout is
2 s); Redis stays paused until they have."""


def test_a_submit_that_timed_out_in_a_stall_keeps_no_slot(
    cluster: Cluster, redis_server: RedisServer
) -> None:
    """Fast-lane submits sent while Redis is paused time out (503), but Redis runs them when it
    resumes, and each takes a lent slot. Nothing else tells the gateway of a take, so before
    `abandon` those slots stayed in flight for as long as the gateway lived."""
    keys = cluster.tenants(["a"])
    cluster.start_worker(speed=4.0, max_num_seqs=8)
    cluster.start_scheduler()
    url = cluster.start_gateway()
    probe = redis.Redis.from_url(redis_server.url, decode_responses=True, socket_timeout=5)
    assert _post(url, keys["a"]).status_code == 200
    lent = f"arb:{{{cluster.cluster}}}:lent:tiny-llama"
    deadline = time.monotonic() + 10
    while not probe.hgetall(lent):  # the lane is open: the leader has lent slots
        assert time.monotonic() < deadline, "the leader lent no slot"
        time.sleep(0.1)
    assert redis_server.proc is not None
    pid = redis_server.proc.pid

    async def lost_submits() -> list[int]:
        body = {"model": "tiny-llama", "prompt": "lost", "max_tokens": 4, "ignore_eos": True}
        h = {"Authorization": f"Bearer {keys['a']}"}
        async with httpx.AsyncClient(timeout=CLIENT_BOUND_S) as client:
            sent = [
                client.post(f"{url}/v1/completions", json=body, headers=h)
                for _ in range(LOST_SUBMITS)
            ]
            return [r.status_code for r in await asyncio.gather(*sent)]

    os.kill(pid, signal.SIGSTOP)
    try:
        statuses = asyncio.run(asyncio.wait_for(lost_submits(), LOST_BOUND_S))
    finally:
        os.kill(pid, signal.SIGCONT)

    assert statuses == [503] * LOST_SUBMITS, statuses
    assert _post(url, keys["a"]).status_code == 200  # served again after recovery
    assert _in_flight_after(probe, cluster.cluster, IDLE_BOUND_S) == {}
    probe.close()
    # each has its row, as a failed submit that had queued would (it had none when its slot
    # was released as an orphan grant's)
    assert _failed_submit_rows(cluster, LOST_SUBMITS) == [("error", None)] * LOST_SUBMITS


def _failed_submit_rows(cluster: Cluster, expected: int) -> list[tuple[str, float | None]]:
    """(status, dispatched_at) of the SQL rows of failed submits, once `expected` are written
    (polled: the recorder writes behind) or after 10 s."""
    db = Database(cluster.db_url)
    try:
        deadline = time.monotonic() + 10
        while True:
            with db.reader() as r:
                rows = [x for x in r.requests.list(limit=1000) if x.error == "submit_failed"]
            if len(rows) >= expected or time.monotonic() > deadline:
                return [(x.status, x.dispatched_at) for x in rows]
            time.sleep(0.2)
    finally:
        db.dispose()
