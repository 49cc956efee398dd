"""A leader's grant read by the grant reader while the failed submit was
still awaiting its reply (the future resolved, then the submit raised)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest
from redis.asyncio import Redis

from control_plane.gateway.abandon import SubmitAbandoner
from control_plane.gateway.finish import Finisher
from control_plane.gateway.grants import GrantWaiter
from control_plane.gateway.reporter import EventReporter
from control_plane.gateway.submit import submit_flight
from control_plane.state import KeySpace, StateStores, StateUnavailable, connect
from tests.control_plane.gateway.test_abandon import (
    GATEWAY,
    NOW,
    _events,
    _until,
    gateway_deps,
)
from tests.control_plane.gateway.test_door import flight_of


@pytest.fixture
async def stores(redis_url: str) -> AsyncIterator[StateStores]:
    client: Redis = connect(redis_url, client_name="abandon-grant-tests")
    yield StateStores.build(client, KeySpace("abandon-grant"))
    await client.aclose()


class GrantedBeforeTheReplyFailed:
    """`submit` runs the real script; the leader grants it and the reader reads the grant
    before the submit's reply is lost (a read timeout after Redis ran it)."""

    def __init__(self, stores: StateStores, waiter: GrantWaiter) -> None:
        self._stores = stores
        self._waiter = waiter

    async def submit(self, *args: Any, **kwargs: Any) -> None:
        await self._stores.requests.submit(*args, **kwargs)
        rid = kwargs["request_id"]
        assert await self._stores.requests.grant(
            rid, worker_id="w1", worker_url="http://w1", now=NOW
        )
        for _ in range(500):  # the reader delivers it to the flight's future
            if rid not in self._waiter._waiting:
                break
            await asyncio.sleep(0.01)
        raise StateUnavailable("Timeout reading from the socket")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stores.requests, name)


async def test_a_grant_read_before_the_submit_raised_is_released(stores: StateStores) -> None:
    flight = flight_of({"model": "m", "prompt": "hello"})
    reporter = EventReporter(stores.completions, interval=0.01)
    store = cast(Any, None)
    deps = gateway_deps(store, reporter)
    finisher = Finisher(deps)
    abandoner = SubmitAbandoner(
        cast(Any, stores.requests),
        GATEWAY,
        finisher.release_unsent,
        finisher.release_orphan,
        delays=(0.01, 0.01),
    )
    waiter = GrantWaiter(stores.grants, GATEWAY, abandoner.release_unwaited)
    store = GrantedBeforeTheReplyFailed(stores, waiter)
    cast(Any, deps).requests = store
    tasks = [asyncio.create_task(reporter.run()), asyncio.create_task(waiter.run())]
    try:
        with pytest.raises(StateUnavailable):
            await submit_flight(deps, waiter, flight, abandoner.abandon)
        await abandoner.settled()
        await finisher.settled()
        await _until(lambda: _ended(stores, flight.id), timeout_s=3.0)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    assert await stores.requests.inflight() == {}
    events = await _events(stores)
    assert [(e.id, e.status, e.error) for e in events] == [(flight.id, "error", "submit_failed")]


async def _ended(stores: StateStores, rid: str) -> bool:
    return await stores.requests.status(rid) != "granted"
