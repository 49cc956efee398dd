"""Forgetting a group's idle consumers (`EventStream.forget_consumers`): one holding nothing
and idle long enough goes; one holding a pending entry, one that read recently and the
caller stay. Each process reads under a name of its own, so without this every restart left
one more consumer in the group."""

from __future__ import annotations

import asyncio

from redis.asyncio import Redis

from control_plane.contracts.events import Progress
from control_plane.state import EventStream, KeySpace, StateStores, connect


async def _names(redis: Redis, keyspace: KeySpace, group: str) -> set[str]:
    return {c["name"] for c in await redis.xinfo_consumers(keyspace.events, group)}


async def test_only_idle_consumers_holding_nothing_are_forgotten(
    events: EventStream, redis: Redis, keyspace: KeySpace
) -> None:
    await events.ensure_groups()
    ids = await events.publish([Progress(f"r{i}", i, 1.0) for i in range(4)])
    await events.read("recorder", "done", count=1, block_ms=None, ack=())
    await events.ack("recorder", ids[:1])  # read and acknowledged: holds nothing
    await events.read("recorder", "holding", count=1, block_ms=None)  # never acknowledged
    await events.read("recorder", "me", count=1, block_ms=None)
    await events.ack("recorder", ids[2:])
    await asyncio.sleep(0.2)
    await events.read("recorder", "recent", block_ms=None)
    await events.ack("recorder", ids[3:])  # holds nothing, but read just now

    gone = await events.forget_consumers("recorder", idle_ms=150, keep="me")

    assert gone == ["done"]
    assert await _names(redis, keyspace, "recorder") == {"holding", "me", "recent"}
    assert len(await events.pending_for("recorder", "holding")) == 1  # nothing lost
    assert await events.forget_consumers("recorder", idle_ms=150, keep="me") == []
    assert await _names(redis, keyspace, "scheduler") == set()  # other groups untouched


async def test_a_forgotten_consumer_reads_again_as_before(
    events: EventStream, redis: Redis, keyspace: KeySpace
) -> None:
    await events.ensure_groups()
    await events.publish([Progress("r0", 1, 1.0)])
    for eid, _ in await events.read("recorder", "late", block_ms=None):
        await events.ack("recorder", [eid])
    assert await events.forget_consumers("recorder", idle_ms=0, keep="other") == ["late"]
    ids = await events.publish([Progress("r", 1, 1.0)])
    assert [eid for eid, _ in await events.read("recorder", "late", block_ms=None)] == ids
    assert [eid for eid, _ in await events.pending_for("recorder", "late")] == ids
    assert await _names(redis, keyspace, "recorder") == {"late"}


async def test_without_a_stream_or_a_group_nothing_is_forgotten(events: EventStream) -> None:
    assert await events.forget_consumers("recorder", idle_ms=0, keep="me") == []
    await events.publish([Progress("r", 1, 1.0)])  # a stream, no group yet
    assert await events.forget_consumers("nobody", idle_ms=0, keep="me") == []


async def test_a_live_consumer_forgotten_between_reads_loses_nothing(
    events: EventStream, redis: Redis, keyspace: KeySpace
) -> None:
    """On Redis 7.0 a read that returns nothing does not reset a consumer's `idle` (from 7.2
    it does), so a live reader on a quiet stream may be forgotten: that must lose nothing."""
    await events.ensure_groups()
    ids = await events.publish([Progress("r0", 1, 1.0)])
    await events.read("recorder", "live", block_ms=None)
    await events.ack("recorder", ids)
    for _ in range(4):  # polling a quiet stream
        await asyncio.sleep(0.05)
        assert await events.read("recorder", "live", block_ms=None) == []
    gone = await events.forget_consumers("recorder", idle_ms=150, keep="me")
    assert gone in ([], ["live"])  # 7.2+: it read 50 ms ago; 7.0: it was given nothing since
    ids = await events.publish([Progress("r1", 1, 1.0)])
    assert [eid for eid, _ in await events.read("recorder", "live", block_ms=None)] == ids
    assert [eid for eid, _ in await events.pending_for("recorder", "live")] == ids


async def test_a_refused_forget_is_logged_and_stops_nothing(
    events: EventStream, redis: Redis, redis_url: str, keyspace: KeySpace
) -> None:
    """A deployment whose Redis user may not run XGROUP DELCONSUMER (an ACL written for the
    release before) must go on reading: the forget runs before each read of a recorder and in
    a leader's takeover."""
    await redis.execute_command(
        "ACL", "SETUSER", "no-delconsumer", "on", ">pw", "~*", "&*", "+@all",
        "-xgroup|delconsumer",
    )  # fmt: skip
    limited = connect(redis_url.replace("redis://", "redis://no-delconsumer:pw@", 1))
    try:
        stream = StateStores.build(limited, keyspace).events
        await stream.ensure_groups()
        await events.publish([Progress("r", 1, 1.0)])
        assert len(await stream.read("recorder", "old", block_ms=None, ack=())) == 1
        await events.ack(
            "recorder", [eid for eid, _ in await events.pending_for("recorder", "old")]
        )
        assert await stream.forget_consumers("recorder", idle_ms=0, keep="me") == []
        assert await _names(redis, keyspace, "recorder") == {"old"}
    finally:
        await limited.aclose()
        await redis.execute_command("ACL", "DELUSER", "no-delconsumer")
