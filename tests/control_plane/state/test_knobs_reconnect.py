"""A knob subscription whose connection redis-py re-established on its own says so
(`StateUnavailable`), so its reader re-reads every knob instead of missing the changes
published while the connection was down."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from redis.asyncio import Redis

from control_plane.contracts.knobs import Other, QueueCap
from control_plane.gateway.knobs import GatewayKnobs, follow_knobs
from control_plane.state import StateStores, StateUnavailable
from control_plane.state.codec import dumps
from control_plane.state.keys import KeySpace
from control_plane.state.scripts import Scripts
from tests.support.waiting import until


async def _subscribers(redis: Redis, keyspace: KeySpace) -> int:
    counts = await redis.pubsub_numsub(keyspace.knobs_channel)
    return int(counts[0][1])


async def test_a_subscription_reconnected_behind_its_back_raises_state_unavailable(
    stores: StateStores, redis: Redis, keyspace: KeySpace
) -> None:
    subscription = await stores.knobs.subscribe()
    try:
        # ≥ 1: a subscription an earlier test leaked on the session's Redis is killed too
        assert await redis.client_kill_filter(_type="pubsub") >= 1
        assert await _subscribers(redis, keyspace) == 0
        await stores.knobs.set("note", Other("published to nobody"))
        with pytest.raises(StateUnavailable, match="re-established"):
            await asyncio.wait_for(anext(subscription), timeout=10)
        with pytest.raises(StateUnavailable):  # spent: the reader must open a new one
            await asyncio.wait_for(anext(subscription), timeout=10)
    finally:
        await subscription.aclose()


async def test_the_first_connect_is_not_a_reconnect(stores: StateStores) -> None:
    async with await stores.knobs.subscribe() as subscription:
        await stores.knobs.set("note", Other("heard"))
        change = await asyncio.wait_for(anext(subscription), timeout=10)
    assert change.value == Other("heard")


class _Directory:
    def __init__(self) -> None:
        self.invalidated = 0

    def invalidate(self) -> None:
        self.invalidated += 1


async def test_the_gateway_applies_a_change_made_while_its_subscription_was_cut(
    stores: StateStores, redis: Redis, keyspace: KeySpace
) -> None:
    await stores.knobs.set("queue_cap", QueueCap(3))
    knobs = GatewayKnobs()
    follower = asyncio.create_task(follow_knobs(stores, knobs, _Directory()))
    try:
        await until(lambda: knobs.queue_cap_default == 3, timeout_s=20)  # subscribed, caught up
        # one transaction: the follower cannot re-subscribe between the kill and the publish
        async with redis.pipeline(transaction=True) as tx:
            tx.execute_command("CLIENT", "KILL", "TYPE", "pubsub")
            tx.execute_command(
                *Scripts.command(
                    "knob_set",
                    [keyspace.knobs, keyspace.knobs_version],
                    ["queue_cap", dumps(QueueCap(7).to_json()), keyspace.knobs_channel],
                )
            )
            killed, version = await tx.execute()
            assert killed >= 1 and version == 2
        await until(lambda: knobs.queue_cap_default == 7, timeout_s=20)
    finally:
        follower.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await follower
