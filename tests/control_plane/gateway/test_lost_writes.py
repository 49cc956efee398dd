"""A Redis restart that loses only the last writes (AOF `everysec` after a machine crash, an RDB
snapshot, a Sentinel fail-over) keeps everything older: a request among those writes, released
by nobody, is submitted again, not taken for a released one whose hash expired. Regression (a
second review): a data marker told the two apart, and such a restart keeps it — the request
was answered 503 with no row anywhere."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from control_plane.gateway.submit import resubmit_if_lost
from control_plane.state import KeySpace, StateStores, connect
from tests.control_plane.gateway.test_lost_gateway import _waiting


@pytest.fixture
async def stores(redis_url: str) -> AsyncIterator[StateStores]:
    client: Redis = connect(redis_url, client_name="lost-writes-tests")
    yield StateStores.build(client, KeySpace("lost-writes"))
    await client.aclose()


async def test_a_request_lost_with_the_last_writes_is_submitted_again(
    stores: StateStores,
) -> None:
    deps, flight = await _waiting(stores)  # a beat, then the submit
    # the machine under Redis crashed; AOF everysec restored all but the last second: the
    # registry is there, the request's writes are not
    await stores.redis.delete(stores.keyspace.request(flight.id), stores.keyspace.queued)
    await stores.redis.delete(stores.keyspace.tenant_queued, stores.keyspace.model_queued)
    # the restart took longer than gateway_dead_after_s: no beat answered meanwhile
    deps.liveness.beaten(time.monotonic() - 6.0, was_alive=True)
    assert deps.liveness.suspect(flight.liveness_epoch)

    # nobody released it (no withdrawn/complete event exists): it must be queued again
    assert await resubmit_if_lost(deps, flight) is False, "answered 503, and no row is written"
    assert await stores.requests.status(flight.id) == "queued"
