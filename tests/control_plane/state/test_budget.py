"""Contract of `TokenBudgets`: one token counter per tenant per UTC day, shared, expiring."""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio import Redis

from control_plane.state import KeySpace, StateStores, StateUnavailable, TokenBudgets
from control_plane.state.budget import USAGE_TTL_S, seconds_to_next_day, utc_day
from tests.support.redis_server import RedisServer

MIDNIGHT = 1_700_006_400.0  # 2023-11-15T00:00:00Z
BEFORE = MIDNIGHT - 0.5  # 2023-11-14, half a second before midnight
AFTER = MIDNIGHT + 0.5


def test_utc_day_and_seconds_to_next_day_split_at_utc_midnight() -> None:
    assert (utc_day(BEFORE), utc_day(MIDNIGHT), utc_day(AFTER)) == (
        "20231114",
        "20231115",
        "20231115",
    )
    assert seconds_to_next_day(BEFORE) == 1
    assert seconds_to_next_day(MIDNIGHT - 0.001) == 1  # never 0: Retry-After is at least 1
    assert seconds_to_next_day(MIDNIGHT) == 86_400
    assert seconds_to_next_day(AFTER) == 86_400  # 86399.5 rounds up to whole seconds
    assert seconds_to_next_day(MIDNIGHT + 3600) == 82_800


def test_the_usage_key_shares_the_cluster_prefix() -> None:
    assert KeySpace("c").usage_day("acme", "20231115") == "arb:{c}:usage:acme:20231115"


async def test_counts_add_up_per_tenant_and_per_utc_day(stores: StateStores) -> None:
    budgets = stores.token_budgets
    assert await budgets.used("a", BEFORE) == 0

    assert await budgets.add("a", 100, BEFORE - 3600) == 100
    assert await budgets.add("a", 20, BEFORE) == 120
    assert await budgets.add("a", 7, AFTER) == 7  # a new UTC day starts from zero
    assert await budgets.add("a", 0, AFTER) == 7

    assert await budgets.used("a", BEFORE) == 120
    assert await budgets.used("a", MIDNIGHT - 86_399) == 120  # any time of that day
    assert await budgets.used("a", AFTER) == 7
    assert await budgets.used("a", MIDNIGHT + 86_399.9) == 7
    assert await budgets.used("a", MIDNIGHT + 86_400) == 0


async def test_tenants_are_isolated(stores: StateStores) -> None:
    budgets = stores.token_budgets
    await budgets.add("a", 50, AFTER)
    await budgets.add("b", 3, AFTER)
    assert (await budgets.used("a", AFTER), await budgets.used("b", AFTER)) == (50, 3)
    assert await budgets.used("c", AFTER) == 0


async def test_concurrent_adds_lose_nothing(stores: StateStores, redis_url: str) -> None:
    other = StateStores.open(redis_url, "test")  # a second gateway's client
    try:
        await asyncio.gather(
            *(s.token_budgets.add("a", 5, AFTER) for s in [stores, other] * 50),
        )
    finally:
        await other.aclose()
    assert await stores.token_budgets.used("a", AFTER) == 500


async def test_the_counter_expires_about_two_days_after_its_last_write(
    stores: StateStores, redis: Redis, keyspace: KeySpace
) -> None:
    await stores.token_budgets.add("a", 1, AFTER)
    ttl = await redis.ttl(keyspace.usage_day("a", "20231115"))
    assert USAGE_TTL_S - 5 <= ttl <= USAGE_TTL_S == 2 * 86_400

    short = TokenBudgets(redis, keyspace, ttl_s=1)
    await short.add("b", 9, AFTER)
    assert await short.used("b", AFTER) == 9
    await asyncio.sleep(1.2)
    assert await short.used("b", AFTER) == 0
    assert await redis.exists(keyspace.usage_day("b", "20231115")) == 0


async def test_bad_arguments_are_refused(stores: StateStores, redis: Redis) -> None:
    with pytest.raises(ValueError):
        await stores.token_budgets.add("a", -1, AFTER)
    with pytest.raises(ValueError):
        TokenBudgets(redis, KeySpace("test"), ttl_s=0)


async def test_an_outage_raises_state_unavailable(
    stores: StateStores, redis_server: RedisServer
) -> None:
    redis_server.stop()
    try:
        with pytest.raises(StateUnavailable):
            await stores.token_budgets.add("a", 1, AFTER)
        with pytest.raises(StateUnavailable):
            await stores.token_budgets.used("a", AFTER)
    finally:
        redis_server.start()
    assert await stores.token_budgets.add("a", 1, AFTER) == 1
