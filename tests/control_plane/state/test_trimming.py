"""Redis memory stays bounded under steady load: streams are trimmed to what every consumer
group is done with, recorded request hashes expire soon — and nothing a group has not
delivered or acknowledged is ever trimmed."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from redis.asyncio import Redis

from control_plane.contracts.events import Complete, Event, Progress, Sender
from control_plane.contracts.requests import Envelope
from control_plane.core.job import Job
from control_plane.recorder.service import Recorder
from control_plane.state import KeySpace, RequestStore, StateStores
from control_plane.state.inflight_view import NO_ENTRY
from control_plane.state.tasks import stop_tasks
from control_plane.state.trimming import group_floor, parse_id
from storage.db import Database
from tests.support.envelopes import envelope

NOW = 1_700_000_000.0


def test_group_floor_is_the_oldest_pending_or_the_last_delivered() -> None:
    assert group_floor("5-3", None) == (5, 3)
    assert group_floor("5-3", "2-9") == (2, 9)
    assert group_floor("5-3", "5-3") == (5, 3)
    assert parse_id("17") == (17, 0)


async def test_never_trims_what_a_group_has_not_delivered_or_acknowledged(
    stores: StateStores, redis: Redis, keyspace: KeySpace
) -> None:
    events = stores.events
    await events.ensure_groups()
    ids = await events.publish([Progress(f"r{i}", i, 1.0) for i in range(1000)])
    sched = await events.read("scheduler", "s", count=1000, block_ms=None)
    await events.ack("scheduler", [e for e, _ in sched])
    first = await events.read("recorder", "r", count=600, block_ms=None)
    await events.ack("recorder", [e for e, _ in first[:300]] + [e for e, _ in first[400:]])

    removed = (await stores.trimmer.trim())[keyspace.events]

    assert 0 < removed <= 300  # entries the recorder acknowledged before its oldest pending
    assert await stores.trimmer.floor(keyspace.events) == ids[300]
    left = [e for e, _ in await redis.xrange(keyspace.events) or []]
    assert set(ids[300:]) <= set(left)
    pending = await events.pending_for("recorder", "r", count=1000)
    assert [e for e, _ in pending] == ids[300:400]  # still readable, with their data
    rest = await events.read("recorder", "r", count=1000, block_ms=None)
    assert [e for e, _ in rest] == ids[600:]  # never delivered: all still there


async def test_a_stream_is_left_alone_until_every_expected_group_exists(
    stores: StateStores, redis: Redis, keyspace: KeySpace
) -> None:
    await redis.xgroup_create(keyspace.events, "scheduler", id="0", mkstream=True)
    await stores.events.publish([Progress("r", i, 1.0) for i in range(500)])
    got = await stores.events.read("scheduler", "s", count=500, block_ms=None)
    await stores.events.ack("scheduler", [e for e, _ in got])
    assert (await stores.trimmer.trim())[keyspace.events] == 0  # the recorder has not started
    assert await redis.xlen(keyspace.events) == 500
    await stores.events.ensure_groups()
    assert len(await stores.events.read("recorder", "r", count=1000, block_ms=None)) == 500


async def test_arrivals_are_trimmed_behind_the_scheduler(
    stores: StateStores, redis: Redis, keyspace: KeySpace
) -> None:
    await stores.arrivals.ensure_group()
    for i in range(500):
        await stores.requests.submit(
            envelope(f"r{i}"),
            request_id=f"r{i}",
            tenant="t",
            gateway_id="g",
            queue_cap=1000,
            now=NOW,
        )
    first = await stores.arrivals.read_after(NO_ENTRY, count=400, block_ms=None)
    assert len(first.arrivals) == 400
    await stores.trimmer.trim()
    assert await redis.xlen(keyspace.arrivals) == 500  # read, not marked applied: all kept
    assert await stores.arrivals.mark(first.last_id, None)
    await stores.trimmer.trim()
    assert 100 <= await redis.xlen(keyspace.arrivals) <= 300
    rest = await stores.arrivals.read_after(first.last_id, count=400, block_ms=None)
    assert len(rest.arrivals) == 100


# -- steady load -----------------------------------------------------------------------------
ROUND = 300


@contextlib.asynccontextmanager
async def recorder_running(stores: StateStores, db: Database) -> AsyncIterator[Recorder]:
    recorder = Recorder(stores, db, "rec", batch=500, interval_s=0.02)
    task = asyncio.create_task(recorder.run())
    try:
        yield recorder
    finally:
        await stop_tasks([task])


async def one_round(stores: StateStores, start: int, last_grant: str) -> str:
    """ROUND requests through submit → arrival → grant → stream → complete → finish."""
    for i in range(start, start + ROUND):
        job = Job(id=f"r{i}", tenant=f"t{i % 3}", arrival=NOW + i, n_in=100, max_tokens=50)
        envelope = Envelope(job, {"tenant": 1.0}, "x" * 400)
        await stores.requests.submit(
            envelope,
            request_id=job.id,
            tenant=job.tenant,
            gateway_id="gw",
            queue_cap=10_000,
            now=NOW,
        )
    start = await stores.arrivals.delivered()
    arrived = await stores.arrivals.read_after(start, count=10_000, block_ms=None)
    for arrival in arrived.arrivals:
        assert await stores.requests.grant(arrival.id, worker_id="w", worker_url="u", now=NOW)
    assert await stores.arrivals.mark(arrived.last_id, None)
    grants = await stores.grants.read("gw", last_grant, block_ms=None, count=10_000)
    events: list[Event] = []
    for _, grant in grants:
        rid = grant.request_id
        events += [Progress(rid, n, NOW) for n in (10, 20, 30)]
        events.append(
            Complete(rid, "ok", finished=NOW + 1, n_in=100, n_out=30, sender=Sender("t0"),
                     arrival=NOW)
        )  # fmt: skip
        assert await stores.requests.finish(rid, now=NOW + 1, status="ok")
    await stores.events.publish(events)
    got = await stores.events.read("scheduler", "sched", count=100_000, block_ms=None)
    await stores.events.ack("scheduler", [e for e, _ in got])
    return grants[-1][0] if grants else last_grant


async def settle(stores: StateStores) -> None:
    """Until the recorder has acknowledged everything it was given."""
    for _ in range(400):
        info = {g["name"]: g for g in await stores.redis.xinfo_groups(stores.keyspace.events)}
        if info["recorder"]["lag"] == 0 and info["recorder"]["pending"] == 0:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the recorder did not catch up")


async def footprint(redis: Redis, keyspace: KeySpace) -> dict[str, int]:
    return {
        "used_memory": int((await redis.info("memory"))["used_memory"]),
        "keys": int(await redis.dbsize()),
        "events": int(await redis.xlen(keyspace.events)),
        "arrivals": int(await redis.xlen(keyspace.arrivals)),
        "grants": int(await redis.xlen(keyspace.grants("gw"))),
    }


@pytest.mark.timeout(180)
async def test_memory_stays_bounded_under_steady_load(
    redis: Redis, keyspace: KeySpace, tmp_path: Path
) -> None:
    stores = StateStores.build(redis, keyspace)
    stores = dataclasses.replace(
        stores, requests=RequestStore(redis, keyspace, recorded_retention_s=1)
    )
    stores.grants._trim_every_s = 0.0
    await stores.events.ensure_groups()
    await stores.arrivals.ensure_group()
    db = Database(f"sqlite:///{tmp_path / 'a.db'}")
    db.migrate()
    seen: list[dict[str, int]] = []
    last_grant = "0-0"
    async with recorder_running(stores, db) as recorder:
        for n in range(8):
            last_grant = await one_round(stores, n * ROUND, last_grant)
            await settle(stores)
            await stores.trimmer.trim()
            await asyncio.sleep(1.2)  # recorded hashes expire after 1 s
            seen.append(await footprint(redis, keyspace))
        assert recorder.written == 8 * ROUND
    db.dispose()

    print("footprint per round:", seen)
    first, last = seen[1], seen[-1]  # after one warm-up round
    for sample in seen:
        # what no reader has finished with yet (the grants of the last round) plus part of a
        # radix node (XTRIM MINID ~ removes whole nodes of up to 100 entries)
        assert sample["events"] <= 200 and sample["arrivals"] <= 200, sample
        assert sample["grants"] <= ROUND + 200, sample
        assert sample["keys"] <= 20, sample  # no request hash outlives its recording
    assert last["used_memory"] <= first["used_memory"] + 256 * 1024, seen
