"""Fixtures of the state contract tests: a decoding client on the session's redis-server."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from control_plane.state import (
    ArrivalsConsumer,
    EventStream,
    GrantStream,
    KeySpace,
    RequestStore,
    StateStores,
    connect,
)


@pytest.fixture
def keyspace() -> KeySpace:
    return KeySpace("test")


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[Redis]:
    client = connect(redis_url, client_name="state-tests")
    yield client
    await client.aclose()


@pytest.fixture
def stores(redis: Redis, keyspace: KeySpace) -> StateStores:
    return StateStores.build(redis, keyspace)


@pytest.fixture
def requests(stores: StateStores) -> RequestStore:
    return stores.requests


@pytest.fixture
def grants(stores: StateStores) -> GrantStream:
    return stores.grants


@pytest.fixture
def events(stores: StateStores) -> EventStream:
    return stores.events


@pytest.fixture
def arrivals(stores: StateStores) -> ArrivalsConsumer:
    return stores.arrivals
