"""Contract of the arrivals, grants and events streams (blocking reads, groups, redelivery)."""

from __future__ import annotations

import asyncio
import time

import pytest
import redis as redis_client
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from control_plane.contracts.events import (
    Complete,
    Event,
    Progress,
    Sender,
    Withdrawn,
    WorkerFailed,
)
from control_plane.state import (
    ArrivalsConsumer,
    EventStream,
    GrantStream,
    KeySpace,
    RequestStore,
    StateStores,
    connect,
)
from control_plane.state import events as events_module
from control_plane.state.inflight_view import NO_ENTRY
from tests.support.envelopes import envelope

NOW = 1_700_000_000.0


async def submit(requests: RequestStore, rid: str, gateway: str = "gw") -> None:
    result = await requests.submit(
        envelope(rid), request_id=rid, tenant="a", gateway_id=gateway, queue_cap=100, now=NOW
    )
    assert result.accepted


async def ids_after(arrivals: ArrivalsConsumer, after: str = NO_ENTRY) -> list[str]:
    return [a.id for a in (await arrivals.read_after(after, count=10, block_ms=None)).arrivals]


async def test_arrivals_group_starts_before_entries_written_before_it_existed(
    arrivals: ArrivalsConsumer, requests: RequestStore
) -> None:
    assert await arrivals.delivered() == NO_ENTRY  # no stream yet
    await submit(requests, "early")
    assert await arrivals.ensure_group()
    assert not await arrivals.ensure_group()
    assert await arrivals.delivered() == NO_ENTRY
    await submit(requests, "late")
    assert await ids_after(arrivals, await arrivals.delivered()) == ["early", "late"]


async def test_arrivals_read_from_the_same_cursor_come_again(
    arrivals: ArrivalsConsumer, requests: RequestStore
) -> None:
    """A read whose reply was lost moved nothing: the next read from that cursor gets the same
    entries (a group read with NOACK had delivered them for good)."""
    await submit(requests, "r1")
    await submit(requests, "r2")
    first = await arrivals.read_after(NO_ENTRY, count=10, block_ms=None)
    again = await arrivals.read_after(NO_ENTRY, count=10, block_ms=None)
    assert [a.id for a in first.arrivals] == [a.id for a in again.arrivals] == ["r1", "r2"]
    assert first.last_id == again.last_id == first.arrivals[-1].entry_id
    assert await ids_after(arrivals, first.last_id) == []
    assert await ids_after(arrivals, first.arrivals[0].entry_id) == ["r2"]


async def test_arrivals_requeues_reappear_without_their_envelope(
    arrivals: ArrivalsConsumer, requests: RequestStore
) -> None:
    await submit(requests, "r1")
    first = await arrivals.read_after(NO_ENTRY, block_ms=None)
    assert await requests.grant("r1", worker_id="w", worker_url="u", now=NOW)
    assert await requests.requeue("r1", now=NOW + 1)
    again = (await arrivals.read_after(first.last_id, block_ms=None)).arrivals
    assert [(a.id, a.envelope) for a in again] == [("r1", None)]


async def test_arrivals_read_blocks_until_a_submit(
    arrivals: ArrivalsConsumer, requests: RequestStore
) -> None:
    reader = asyncio.create_task(arrivals.read_after("$", block_ms=3000))
    await asyncio.sleep(0.2)
    assert not reader.done()

    start = time.perf_counter()
    await submit(requests, "r1")
    batch = await asyncio.wait_for(reader, timeout=2)

    assert [a.id for a in batch.arrivals] == ["r1"]
    assert time.perf_counter() - start < 0.5


async def test_arrivals_mark_is_fenced_and_recreates_a_lost_group(
    arrivals: ArrivalsConsumer, requests: RequestStore, redis: Redis, keyspace: KeySpace
) -> None:
    await arrivals.ensure_group()
    await submit(requests, "r1")
    await submit(requests, "r2")
    r1, r2 = (await arrivals.read_after(NO_ENTRY, block_ms=None)).arrivals
    await redis.set(keyspace.leader_epoch, 5)
    assert not await arrivals.mark(r2.entry_id, 4)  # a deposed leader's late mark
    assert await arrivals.delivered() == NO_ENTRY
    assert await arrivals.mark(r1.entry_id, 5)
    assert await arrivals.delivered() == r1.entry_id
    assert await arrivals.mark(r2.entry_id, None)  # unfenced
    assert await arrivals.delivered() == r2.entry_id

    await redis.delete(keyspace.arrivals)  # lost with Redis' data
    assert await ids_after(arrivals) == []
    assert await arrivals.mark(r1.entry_id, 5)
    assert await arrivals.delivered() == r1.entry_id
    await submit(requests, "r3")
    assert await ids_after(arrivals, r1.entry_id) == ["r3"]


async def test_grants_reader_follows_its_own_stream_from_latest_id(
    grants: GrantStream, requests: RequestStore
) -> None:
    await submit(requests, "old", gateway="gw1")
    assert await requests.grant("old", worker_id="w", worker_url="u", now=NOW)
    await submit(requests, "other", gateway="gw2")
    assert await requests.grant("other", worker_id="w", worker_url="u", now=NOW)

    last = await grants.latest_id("gw1")
    reader = asyncio.create_task(grants.read("gw1", last, block_ms=3000))
    await asyncio.sleep(0.2)
    assert not reader.done()
    await submit(requests, "new", gateway="gw1")
    assert await requests.grant("new", worker_id="w2", worker_url="http://w2", now=NOW + 1)
    entries = await asyncio.wait_for(reader, timeout=2)

    assert [(g.request_id, g.worker_id, g.worker_url) for _, g in entries] == [
        ("new", "w2", "http://w2")
    ]
    assert entries[0][0] > last
    assert await grants.latest_id("nobody") == "0-0"
    assert await grants.read("gw1", entries[0][0], block_ms=None) == []


async def test_grants_trim_and_delete(grants: GrantStream, requests: RequestStore) -> None:
    for i in range(5):
        await submit(requests, f"r{i}", gateway="gw1")
        assert await requests.grant(f"r{i}", worker_id="w", worker_url="u", now=NOW)
    entries = await grants.read("gw1", "0-0", block_ms=None)

    assert await grants.trim_before("gw1", entries[3][0]) == 3
    assert [g.request_id for _, g in await grants.read("gw1", "0-0", block_ms=None)] == [
        "r3",
        "r4",
    ]
    await grants.delete("gw1")
    assert await grants.latest_id("gw1") == "0-0"


async def test_events_fan_out_to_each_group_typed(events: EventStream) -> None:
    await events.ensure_groups()
    payloads: list[Event] = [
        Progress("r1", 5, 1.5),
        Complete("r1", "ok", finished=2.0, n_in=3, n_out=5, sender=Sender("acme")),
        Withdrawn("r2", "queue_timeout", tenant="acme", seq=4, at=3.0),
        WorkerFailed("r3", "w1", "reset", 4.0),
    ]

    ids = await events.publish(payloads)

    assert len(ids) == 4
    for group in ("scheduler", "recorder"):
        got = await events.read(group, "c1", block_ms=None)
        assert got == list(zip(ids, payloads, strict=True))
    assert await events.publish([]) == []


@pytest.mark.parametrize("multiplex", [True, False])
async def test_an_entry_not_in_utf8_does_not_fail_the_read_of_its_batch(
    redis_url: str, keyspace: KeySpace, multiplex: bool
) -> None:
    """A hand edit's bytes in one event (a tenant that is not UTF-8): decoded with U+FFFD,
    so the batch is read — the entry itself decodes, or is set aside as not an event — where
    the whole read raised each time, holding up every event behind it."""
    client = connect(redis_url, client_name="utf8-test", multiplex=multiplex)
    try:
        events = StateStores.build(client, keyspace).events
        await events.ensure_groups()
        bad = b'{"type":"withdrawn","id":"r1","reason":"queue_timeout","tenant":"\xffme"}'
        raw = redis_client.Redis.from_url(redis_url)
        raw.xadd(keyspace.events, {"data": bad})
        raw.close()
        ids = await events.publish([Progress("r2", 1, 1.0)])
        got = await events.read("recorder", "r", block_ms=None)
        assert [event for _, event in got][-1] == Progress("r2", 1, 1.0)
        assert got[-1][0] == ids[0]
        withdrawn = [event for _, event in got if isinstance(event, Withdrawn)]
        assert [w.tenant for w in withdrawn] == ["\ufffdme"]
    finally:
        await client.aclose()


async def test_unacked_events_are_redelivered_after_a_restart(events: EventStream) -> None:
    await events.ensure_groups()
    ids = await events.publish([Progress(f"r{i}", i, 1.0) for i in range(3)])
    assert len(await events.read("recorder", "rec-1", block_ms=None)) == 3

    assert await events.ack("recorder", ids[:1]) == 1

    # The recorder restarts under the same name: its unacknowledged entries come back.
    assert await events.read("recorder", "rec-1", block_ms=None) == []
    again = await events.pending_for("recorder", "rec-1")
    assert [entry_id for entry_id, _ in again] == ids[1:]
    assert await events.pending_count("recorder") == 2
    await events.ack("recorder", [entry_id for entry_id, _ in again])
    assert await events.pending_for("recorder", "rec-1") == []
    assert await events.pending_count("recorder") == 0


async def test_a_read_acknowledges_what_the_last_one_returned(
    events: EventStream, redis: Redis, keyspace: KeySpace
) -> None:
    await events.ensure_groups()
    ids = await events.publish([Progress(f"r{i}", i, 1.0) for i in range(3)])
    first = await events.read("scheduler", "s1", count=2, block_ms=None)
    assert [entry_id for entry_id, _ in first] == ids[:2]
    assert await events.pending_count("scheduler") == 2

    second = await events.read("scheduler", "s1", block_ms=None, ack=ids[:2])

    assert [entry_id for entry_id, _ in second] == ids[2:]
    assert [entry_id for entry_id, _ in await events.pending_for("scheduler", "s1")] == ids[2:]
    # the group lost (a Redis that restarted empty): acknowledged nothing, read recreates it
    await redis.delete(keyspace.events)
    later = await events.publish([Progress("r9", 9, 2.0)])
    assert [e for e, _ in await events.read("scheduler", "s1", block_ms=None, ack=ids)] == later


async def test_events_of_a_dead_consumer_are_claimed_once_idle(events: EventStream) -> None:
    await events.ensure_groups()
    ids = await events.publish([Progress(f"r{i}", i, 1.0) for i in range(4)])
    await events.read("recorder", "dead", block_ms=None)

    assert await events.claim("recorder", "alive", min_idle_ms=60_000) == []
    await asyncio.sleep(0.15)
    claimed = await events.claim("recorder", "alive", min_idle_ms=100, count=3)

    assert [entry_id for entry_id, _ in claimed] == ids[:3]
    rest = await events.claim("recorder", "alive", min_idle_ms=100)
    assert [entry_id for entry_id, _ in rest] == ids[3:]
    assert len(await events.pending_for("recorder", "alive")) == 4
    assert await events.pending_for("recorder", "dead") == []


async def test_event_read_blocks_and_recreates_a_lost_group(
    events: EventStream, redis: Redis, keyspace: KeySpace
) -> None:
    await events.ensure_groups()
    await redis.delete(keyspace.events)
    reader = asyncio.create_task(events.read("scheduler", "s1", block_ms=3000))
    await asyncio.sleep(0.2)
    assert not reader.done()

    await events.publish([Progress("r1", 1, 1.0)])

    got = await asyncio.wait_for(reader, timeout=2)
    assert [event for _, event in got] == [Progress("r1", 1, 1.0)]


async def test_without_a_replica_publishes_stop_waiting_for_one(
    redis: Redis, keyspace: KeySpace
) -> None:
    """Sentinel mode waits (≤ the timeout) for a replica on each publish; with none answering,
    it stops waiting after a few publishes instead of slowing every completion."""
    stream = EventStream(redis, keyspace, replica_acks=1, ack_timeout_ms=20)
    event = Progress("r1", 1, 1.0)
    for _ in range(events_module.UNACKED_PAUSE):
        started = time.monotonic()
        await stream.publish([event])
        assert time.monotonic() - started >= 0.015  # waited for the replica that is not there
    assert stream._wait_from > time.monotonic()  # not waiting for a while
    assert len(await stream.publish([event])) == 1


async def test_ack_with_noack_is_refused(events: EventStream) -> None:
    with pytest.raises(ValueError, match="noack"):
        await events.read("scheduler", "s1", block_ms=None, noack=True, ack=["1-1"])


async def test_unconsumed_counts_undelivered_and_unacknowledged_per_group(
    events: EventStream, redis: Redis, keyspace: KeySpace
) -> None:
    assert await events.unconsumed() == {"scheduler": 0, "recorder": 0}  # no stream yet
    ids = await events.publish([Progress(f"r{i}", i, 1.0) for i in range(3)])
    assert await events.unconsumed() == {"scheduler": 3, "recorder": 3}  # no group yet
    await events.ensure_groups()
    await events.read("scheduler", "s1", count=2, block_ms=None)
    assert await events.unconsumed() == {"scheduler": 3, "recorder": 3}  # 1 behind + 2 pending
    await events.read("scheduler", "s1", block_ms=None, ack=ids[:2])
    await events.ack("scheduler", ids[2:])
    assert await events.unconsumed() == {"scheduler": 0, "recorder": 3}
    # an entry deleted mid-stream: Redis no longer counts the lag; caught up or not is exact
    await redis.xdel(keyspace.events, ids[1])
    assert (await events.unconsumed())["recorder"] >= 1
    await events.read("recorder", "r1", block_ms=None, noack=True)
    assert await events.unconsumed() == {"scheduler": 0, "recorder": 0}
    # the last entry deleted before a group read it: nothing is left for it to read
    more = await events.publish([Progress("r7", 7, 1.0), Progress("r8", 8, 1.0)])
    await redis.xdel(keyspace.events, more[1])
    await events.read("scheduler", "s1", block_ms=None, noack=True)
    await events.read("recorder", "r1", block_ms=None, noack=True)
    assert await events.unconsumed() == {"scheduler": 0, "recorder": 0}


async def test_unconsumed_raises_when_the_stream_key_is_not_a_stream(
    events: EventStream, redis: Redis, keyspace: KeySpace
) -> None:
    await redis.set(keyspace.events, "not a stream")
    with pytest.raises(ResponseError, match="WRONGTYPE"):
        await events.unconsumed()
