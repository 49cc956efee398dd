"""The dead-letter store, and every stream reader setting malformed entries aside in it."""

from __future__ import annotations

import dataclasses

from redis.asyncio import Redis

from control_plane.contracts.events import Progress
from control_plane.state import KeySpace, StateStores
from control_plane.state.dead_letters import DeadLetters
from control_plane.state.inflight_view import NO_ENTRY
from control_plane.state.trimming import parse_id
from tests.support.envelopes import envelope

NOW = 1_700_000_000.0


async def test_add_list_newest_first_page_and_count(stores: StateStores) -> None:
    dead = stores.dead_letters
    ids = [
        await dead.add(
            consumer="recorder",
            kind="write",
            reason=f"bad {i}",
            source="events",
            entry_id=f"1-{i}",
            fields={"id": f"r{i}", "tier": 2**63, "text": "日本"},
            now=NOW + i,
        )
        for i in range(5)
    ]
    page = await dead.list(limit=2)
    assert [x.id for x in page] == [ids[4], ids[3]]
    assert page[0].fields == {"id": "r4", "tier": 2**63, "text": "日本"}
    assert (page[0].reason, page[0].entry_id, page[0].at) == ("bad 4", "1-4", NOW + 4)
    older = await dead.list(limit=10, before=page[-1].id)
    assert [x.id for x in older] == [ids[2], ids[1], ids[0]]
    assert await dead.counts() == {"recorder:write": 5}
    assert await dead.length() == 5


async def test_the_stream_is_bounded_but_the_counts_are_not(
    redis: Redis, keyspace: KeySpace
) -> None:
    dead = DeadLetters(redis, keyspace, maxlen=100)
    for i in range(1000):
        await dead.add(
            consumer="gateway", kind="decode", reason="x", source="s", entry_id=str(i), fields={}
        )
    assert 100 <= await dead.length() < 300  # MAXLEN ~ trims whole nodes
    assert (await dead.counts())["gateway:decode"] == 1000
    assert (await dead.list(limit=1))[0].entry_id == "999"


async def test_events_that_are_not_json_objects_are_set_aside_for_each_group(
    stores: StateStores, redis: Redis, keyspace: KeySpace
) -> None:
    events = stores.events
    await events.ensure_groups()
    bad = [
        await redis.xadd(keyspace.events, {"data": "{oops"}),
        await redis.xadd(keyspace.events, {"nodata": "1"}),
        await redis.xadd(keyspace.events, {"data": "42"}),
    ]
    bad.append(await redis.xadd(keyspace.events, {"data": '{"type": "done", "id": "r0"}'}))
    bad.append(
        await redis.xadd(
            keyspace.events, {"data": '{"type": "progress", "id": "r0", "n_out": "7"}'}
        )
    )
    (good,) = await events.publish([Progress("r1", 3, 1.0)])

    assert await events.read("recorder", "c1", block_ms=None) == [(good, Progress("r1", 3, 1.0))]
    assert await events.pending_count("recorder") == 1  # only the good one awaits its ack
    letters = await stores.dead_letters.list()
    assert sorted(x.entry_id for x in letters) == sorted(bad)
    assert {(x.consumer, x.kind, x.source) for x in letters} == {("recorder", "decode", "events")}

    assert [e for e, _ in await events.read("scheduler", "s1", block_ms=None)] == [good]
    assert (await stores.dead_letters.counts()) == {"recorder:decode": 5, "scheduler:decode": 5}
    reasons = {x.entry_id: x.reason for x in letters if x.consumer == "recorder"}
    assert "type: unknown event type 'done'" in reasons[str(bad[3])]
    assert "n_out: expected an integer, got str" in reasons[str(bad[4])]


async def test_pending_and_claimed_bad_entries_are_set_aside_too(
    stores: StateStores, redis: Redis, keyspace: KeySpace
) -> None:
    events = stores.events
    await events.ensure_groups()
    await redis.xadd(keyspace.events, {"data": "nope"})
    # delivered raw to a consumer that then died: seen again through pending_for and claim
    await redis.xreadgroup("recorder", "dead", {keyspace.events: ">"})
    assert await events.claim("recorder", "alive", min_idle_ms=0) == []
    assert await events.pending_count("recorder") == 0
    assert len(await stores.dead_letters.list()) == 1


async def test_malformed_arrivals_are_skipped_and_the_rest_still_arrives(
    stores: StateStores, redis: Redis, keyspace: KeySpace
) -> None:
    arrivals = stores.arrivals
    await arrivals.ensure_group()
    bad = [
        await redis.xadd(keyspace.arrivals, {"id": "x1", "seq": "one"}),
        await redis.xadd(keyspace.arrivals, {"id": "x2", "envelope": "{broken"}),
        await redis.xadd(keyspace.arrivals, {"id": "x3", "envelope": "[1]"}),
        await redis.xadd(keyspace.arrivals, {"seq": "4"}),
        await redis.xadd(keyspace.arrivals, {"id": "x5", "envelope": '{"job": {"id": "x5"}}'}),
    ]
    await stores.requests.submit(
        envelope("ok"), request_id="ok", tenant="t", gateway_id="g", queue_cap=9, now=NOW
    )
    got = (await arrivals.read_after(NO_ENTRY, block_ms=None)).arrivals
    assert [(a.id, a.envelope) for a in got] == [("ok", envelope("ok"))]
    assert parse_id(got[0].entry_id) > parse_id(str(bad[-1]))
    letters = await stores.dead_letters.list()
    assert sorted(x.entry_id for x in letters) == sorted(bad)
    assert {(x.consumer, x.source) for x in letters} == {("scheduler", "arrivals")}

    again = (await arrivals.read_after(NO_ENTRY, block_ms=None)).arrivals  # a lost reply's retry
    assert [a.id for a in again] == ["ok"]
    assert len(await stores.dead_letters.list()) == len(bad)  # each bad entry kept once
    assert await stores.dead_letters.counts() == {"scheduler:decode": len(bad)}


async def test_malformed_grants_are_set_aside_and_deleted(
    stores: StateStores, redis: Redis, keyspace: KeySpace
) -> None:
    stream = keyspace.grants("gw")
    await redis.xadd(stream, {"id": "r0"})
    await redis.xadd(stream, {"id": "r1", "worker_id": "w", "worker_url": "u", "granted_at": "x"})
    await stores.requests.submit(
        envelope("r2"), request_id="r2", tenant="t", gateway_id="gw", queue_cap=9, now=NOW
    )
    assert await stores.requests.grant("r2", worker_id="w", worker_url="http://w", now=NOW)

    got = await stores.grants.read("gw", "0-0", block_ms=None)
    assert [g.request_id for _, g in got] == ["r2"]
    assert await redis.xlen(stream) == 1  # not read again
    letters = await stores.dead_letters.list()
    assert sorted(x.fields["id"] for x in letters) == ["r0", "r1"]
    assert {(x.consumer, x.kind, x.source) for x in letters} == {("gateway", "decode", stream)}


async def test_grant_reads_trim_what_the_reader_has_processed(
    stores: StateStores, redis: Redis, keyspace: KeySpace
) -> None:
    grants = dataclasses.replace(stores).grants
    grants._trim_every_s = 0.0  # every read trims (normally at most every 5 s)
    stream = keyspace.grants("gw")
    ids = [
        str(await redis.xadd(stream, {"id": f"r{i}", "worker_id": "w", "worker_url": "u"}))
        for i in range(1000)
    ]
    assert await grants.read("gw", ids[899], block_ms=None)
    assert 100 <= await redis.xlen(stream) <= 300  # ~ MINID trims whole nodes, keeps ids[899]
    assert [e for e, _ in await redis.xrange(stream, ids[899], ids[899]) or []] == [ids[899]]


async def test_an_entry_set_aside_twice_is_kept_once(
    stores: StateStores, redis: Redis, keyspace: KeySpace
) -> None:
    """A set-aside that timed out at its caller still runs when Redis answers again, after the
    caller repeated it. Regression: the repeat appended and counted the entry a second time."""
    events = stores.events
    await events.ensure_groups()
    entry_id = str(await redis.xadd(keyspace.events, {"data": "{}"}))
    await redis.xreadgroup("recorder", "r1", {keyspace.events: ">"})
    first = await events.set_aside("recorder", entry_id, kind="write", reason="x", fields={})
    again = await events.set_aside("recorder", entry_id, kind="write", reason="x", fields={})

    assert first and again == ""
    assert await stores.dead_letters.length() == 1
    assert await stores.dead_letters.counts() == {"recorder:write": 1}
    assert await events.pending_count("recorder") == 0
