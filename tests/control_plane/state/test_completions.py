"""Contract of Completions: a gateway's events and the marks of its finished requests in one
MULTI/EXEC on the pipelined connection — the marks after the events, or nothing at all."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from control_plane.contracts.events import Complete, Event, Progress, Sender
from control_plane.core.job import Slo
from control_plane.state import GrantOrder, KeySpace, StateStores, StateUnavailable, connect
from tests.support.envelopes import envelope

NOW = 1_700_000_000.5


def _complete(rid: str) -> Complete:
    sender = Sender(tenant="acme", model="m", slo=Slo())
    return Complete(id=rid, status="ok", finished=NOW + 1, n_in=3, n_out=4, sender=sender)


async def _granted(stores: StateStores, *rids: str) -> None:
    for rid in rids:
        result = await stores.requests.submit(
            envelope(rid, "acme"), request_id=rid, tenant="acme", gateway_id="gw",
            queue_cap=100, now=NOW,
        )  # fmt: skip
        assert result.accepted
    orders = [GrantOrder(rid, "w1", "http://w1") for rid in rids]
    assert all(await stores.requests.grant_many(orders, now=NOW))


async def _transactions(redis: Redis) -> int:
    stats = await redis.info("commandstats")
    return int(stats.get("cmdstat_exec", {}).get("calls", 0))


async def test_events_and_marks_go_in_one_transaction(
    stores: StateStores, redis: Redis, keyspace: KeySpace
) -> None:
    await _granted(stores, "a", "b")
    events: list[Event] = [_complete("a"), Progress("c", 5, NOW), _complete("b")]
    before = await _transactions(redis)

    marked = await stores.completions.publish(events, [("a", "ok"), ("b", "error")], now=NOW)

    assert marked
    assert await _transactions(redis) == before + 1
    assert await stores.requests.status("a") == "ok"
    assert await stores.requests.status("b") == "error"
    assert await stores.requests.inflight() == {}
    entries = await redis.xrange(keyspace.events)
    assert len(entries) == 3


async def test_a_script_redis_forgot_is_loaded_and_the_marks_repeated(
    stores: StateStores, redis: Redis
) -> None:
    await _granted(stores, "a")
    await redis.script_flush()

    assert await stores.completions.publish([_complete("a")], [("a", "ok")], now=NOW)

    assert await stores.requests.status("a") == "ok"
    assert await redis.xlen(stores.keyspace.events) == 1


async def test_a_refused_transaction_publishes_and_marks_nothing(
    stores: StateStores, redis: Redis
) -> None:
    await _granted(stores, "a")
    await redis.config_set("maxmemory", 1)  # every XADD refused: OOM
    try:
        with pytest.raises(StateUnavailable):
            await stores.completions.publish([_complete("a")], [("a", "ok")], now=NOW)
    finally:
        await redis.config_set("maxmemory", 0)

    assert await stores.requests.status("a") == "granted"
    assert await redis.xlen(stores.keyspace.events) == 0


async def test_a_bad_status_sends_nothing(stores: StateStores, redis: Redis) -> None:
    await _granted(stores, "a")
    with pytest.raises(ValueError, match="final status"):
        await stores.completions.publish([_complete("a")], [("a", "done")], now=NOW)
    assert await redis.xlen(stores.keyspace.events) == 0


@pytest.fixture
async def plain(redis_url: str) -> AsyncIterator[StateStores]:
    client = connect(redis_url, client_name="plain", multiplex=False)
    yield StateStores.build(client, KeySpace("test"))
    await client.aclose()


async def test_without_a_multiplexer_only_the_events_are_published(
    plain: StateStores, redis: Redis
) -> None:
    await _granted(plain, "a")

    assert not await plain.completions.publish([_complete("a")], [("a", "ok")], now=NOW)

    assert await plain.requests.status("a") == "granted"  # the caller marks it
    assert await redis.xlen(plain.keyspace.events) == 1
    assert await plain.completions.publish([Progress("a", 1, NOW)], [], now=NOW)


async def test_marks_that_fail_after_their_events_are_left_to_the_caller(
    stores: StateStores, redis: Redis, keyspace: KeySpace
) -> None:
    await redis.set(keyspace.request("a"), "not a hash")  # finish.lua fails on it: WRONGTYPE

    assert not await stores.completions.publish([_complete("a")], [("a", "ok")], now=NOW)

    assert await redis.xlen(keyspace.events) == 1  # published once, not to be sent again


@pytest.mark.parametrize("multiplexed", [True, False])
async def test_redis_refusing_the_events_is_an_outage_to_the_caller(
    multiplexed: bool, stores: StateStores, plain: StateStores, redis: Redis, keyspace: KeySpace
) -> None:
    """The stream's key of another type refuses every event alike (as MISCONF or NOPERM
    would): the caller is told to keep them and retry, and nothing is marked — though in a
    transaction an XADD failing when run does not stop the script after it (the script,
    loaded, checks the stream itself)."""
    sink = stores if multiplexed else plain
    await sink.preload_scripts()
    await _granted(sink, "a")
    await redis.set(keyspace.events, "not a stream")

    with pytest.raises(StateUnavailable, match="refused the events"):
        await sink.completions.publish([_complete("a")], [("a", "ok")], now=NOW)

    assert await sink.requests.status("a") == "granted"
    await redis.delete(keyspace.events)  # the operator fixed it: the retry goes through
    assert await sink.completions.publish([_complete("a")], [("a", "ok")], now=NOW) is multiplexed
    assert len(await redis.xrange(keyspace.events)) == 1
