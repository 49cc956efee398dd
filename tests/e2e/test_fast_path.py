"""The fast lane end to end: real processes, real HTTP, `ARBITER_FAST_PATH=1`.

- Leader killed -9 while clients keep about as many requests in flight as the workers hold,
  so the lane opens and closes all the time: nothing lost or served twice, and no worker ever
  held more requests than its `max_num_seqs` (from the recorder's rows).
- A flooding tenant keeps the queue non-empty: no request takes the lane, the scheduler
  decides every one (VTC still serves the light tenant first), while on the idle cluster the
  same tenant's requests were granted in their submit script (`X-Arbiter-Timing: …;fast=1`).
"""

from __future__ import annotations

import asyncio
import collections
import statistics
import time

import httpx

from control_plane.bench.load import parse_timing
from storage.db import Database
from storage.records import RequestRecord
from tests.support.cluster import Cluster
from tests.support.occupancy import peak_per_worker

SEQS = 8
BODY = {"model": "tiny-llama", "prompt": "hello", "max_tokens": 8, "ignore_eos": True}
FLOOD_BODY = {**BODY, "max_tokens": 64}
"""The flood's requests hold their slots 8 times longer, so its 24 clients keep the queue full
even when the test process (their only driver) lags: with 8-token requests, suite runs on a
loaded box saw the 16 queued drain during such a lag and the lane open mid-flood."""
TIMING = {"X-Arbiter-Debug-Timing": "1"}


def _rows(db_url: str, n: int, limit_s: float = 30) -> list[RequestRecord]:
    db = Database(db_url)
    deadline = time.monotonic() + limit_s
    try:
        while True:
            with db.reader() as r:
                rows = r.requests.list(limit=10_000)
            if len(rows) >= n or time.monotonic() > deadline:
                return rows
            time.sleep(0.3)
    finally:
        db.dispose()


async def _client(
    client: httpx.AsyncClient,
    url: str,
    key: str,
    count: int,
    out: list[tuple[int, str, dict[str, float]]],
    body: dict[str, object] = BODY,
) -> None:
    headers = {"Authorization": f"Bearer {key}", **TIMING}
    for _ in range(count):
        resp = await client.post(f"{url}/v1/completions", json=body, headers=headers)
        stamps = parse_timing(resp.headers.get("X-Arbiter-Timing", ""))
        out.append((resp.status_code, resp.headers.get("X-Arbiter-Request-Id", ""), stamps))


async def _flood(
    client: httpx.AsyncClient,
    url: str,
    key: str,
    stop: asyncio.Event,
    out: list[tuple[int, str, dict[str, float]]],
) -> None:
    while not stop.is_set():
        await _client(client, url, key, 1, out, FLOOD_BODY)


def test_failover_with_the_fast_lane_loses_nothing_and_never_overcommits(cluster: Cluster) -> None:
    cluster.extra_env["ARBITER_FAST_PATH"] = "1"
    keys = cluster.tenants(["t"])
    for _ in range(2):
        cluster.start_worker(speed=2.0, max_num_seqs=SEQS)
    leader = cluster.start_scheduler(name="scheduler-a")
    time.sleep(1.0)
    cluster.start_scheduler(name="scheduler-b", with_recorder=False)
    url = cluster.start_gateway()
    time.sleep(1.5)  # a scrape: the leader lends only to workers it has seen healthy
    out: list[tuple[int, str, dict[str, float]]] = []

    async def scenario() -> None:
        async with httpx.AsyncClient(timeout=120) as client:
            load = asyncio.gather(*(_client(client, url, keys["t"], 15, out) for _ in range(18)))
            task = asyncio.ensure_future(load)
            await asyncio.sleep(2.0)
            cluster.kill9(leader)
            await task

    asyncio.run(scenario())
    codes = collections.Counter(code for code, _, _ in out)
    fast = sum(1 for _, _, s in out if s.get("fast") == 1.0)
    print(f"\nclient outcomes: {dict(codes)}; fast lane: {fast} of {len(out)}")
    assert codes == {200: 18 * 15}, codes
    assert 0 < fast < len(out)
    rows = _rows(cluster.db_url, len(out))
    ids = [row.id for row in rows]
    assert len(ids) == len(set(ids)) == len(out)
    assert set(ids) == {rid for _, rid, _ in out}
    assert all(row.status == "ok" and row.n_out == 8 for row in rows)
    peaks = peak_per_worker(rows)
    print(f"most requests held at once per worker: {peaks} (max_num_seqs {SEQS})")
    assert peaks and max(peaks.values()) <= SEQS


def test_a_flooding_tenant_closes_the_lane_and_the_scheduler_decides(cluster: Cluster) -> None:
    cluster.extra_env["ARBITER_FAST_PATH"] = "1"
    keys = cluster.tenants(["quiet", "flood"])
    for _ in range(2):
        cluster.start_worker(speed=1.0, max_num_seqs=4)
    cluster.start_scheduler()
    url = cluster.start_gateway()
    time.sleep(1.5)
    idle: list[tuple[int, str, dict[str, float]]] = []
    quiet: list[tuple[int, str, dict[str, float]]] = []
    flood: list[tuple[int, str, dict[str, float]]] = []

    async def scenario() -> None:
        async with httpx.AsyncClient(timeout=120) as client:
            await _client(client, url, keys["quiet"], 5, idle)
            stop = asyncio.Event()
            flooding = asyncio.gather(
                *(_flood(client, url, keys["flood"], stop, flood) for _ in range(24))
            )
            await asyncio.sleep(1.5)  # the queue has filled
            await _client(client, url, keys["quiet"], 10, quiet)
            stop.set()
            await flooding

    asyncio.run(scenario())
    assert all(code == 200 for code, _, _ in [*idle, *quiet, *flood])
    assert all(s.get("fast") == 1.0 for _, _, s in idle), idle
    for _, _, s in idle:  # the hops of a fast grant: decided in the submit script itself
        assert s["decided"] == s["submitted"] <= s["granted"] <= s["upstream"]
    assert not any(s.get("fast") for _, _, s in quiet), quiet
    wait = {
        name: statistics.median(s["decided"] - s["submitted"] for _, _, s in runs)
        for name, runs in (("quiet", quiet), ("flood", flood[len(flood) // 2 :]))
    }
    print(f"\nmedian wait for the scheduler's decision (s): {wait}")
    assert wait["quiet"] < wait["flood"]  # VTC: the light tenant goes first


def test_a_request_queued_behind_paced_events_is_granted_without_waiting_for_the_gap(
    cluster: Cluster,
) -> None:
    """The leader's events pacing (`scheduler/pacing.py`), with a gap no test could wait out.

    One worker holding one request: after a fast-lane request's completion has been read, the
    leader pauses its events reads, so the next request's completion is not read and no slot
    is lent for the request after it. That one is queued, and its arrival must end the pause:
    the leader reads the completion, sees the slot free and grants it.
    """
    cluster.extra_env["ARBITER_FAST_PATH"] = "1"
    cluster.extra_env["ARBITER_LEADER_EVENTS_GAP_S"] = "1.0"  # the most it may be
    keys = cluster.tenants(["t"])
    cluster.start_worker(speed=2.0, max_num_seqs=1)
    cluster.start_scheduler()
    url = cluster.start_gateway()
    time.sleep(1.5)  # a scrape: the leader lends only to workers it has seen healthy
    out: list[tuple[int, str, dict[str, float]]] = []

    async def scenario() -> None:
        async with httpx.AsyncClient(timeout=30) as client:
            await _client(client, url, keys["t"], 12, out)

    started = time.monotonic()
    asyncio.run(scenario())
    took = time.monotonic() - started
    assert [code for code, _, _ in out] == [200] * 12, out
    queued = [s for _, _, s in out if not s.get("fast")]
    waits = [s["decided"] - s["submitted"] for s in queued]
    print(f"\n12 requests in {took:.2f}s; {len(queued)} queued, decided after {waits} s")
    assert queued, "the lane never ran dry: no request was queued behind a paused leader"
    assert max(waits) < 0.5, waits  # not the 1 s gap
