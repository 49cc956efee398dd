"""Waiting for a grant when the wait ends another way, against a real redis-server, the real
scripts and a running grant reader: a grant that wins the race is served to a client still
there, and one the reader delivered while Redis failed the withdrawal is released, not kept.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import pytest
from fastapi import FastAPI
from redis.asyncio import Redis
from starlette.requests import Request

from control_plane.contracts.grants import Grant
from control_plane.contracts.requests import Envelope
from control_plane.gateway.errors import ApiError, error_response
from control_plane.gateway.flight import Flight
from control_plane.gateway.grants import GrantWaiter
from control_plane.gateway.metrics import hashed_tenant
from control_plane.gateway.reporter import EventReporter
from control_plane.gateway.service import Gateway
from control_plane.settings import Settings
from control_plane.state import KeySpace, StateStores, StateUnavailable, connect
from control_plane.state.tasks import stop_tasks
from tests.control_plane.gateway.test_abandon import GATEWAY, gateway_deps
from tests.control_plane.gateway.test_door import flight_of

NOW = 1_700_000_000.0


class GrantedDuringWithdraw:
    """The real request store, except that `withdraw` first lets the leader grant the request
    and the grant reader deliver it; then it answers as the real script does (`fail` False:
    refused, the grant won) or raises as a read timeout does (`fail` True)."""

    def __init__(self, store: Any, fut: asyncio.Future[Grant], fail: bool) -> None:
        self._store = store
        self._fut = fut
        self._fail = fail

    async def withdraw(
        self, request_id: str, *, now: float, reason: str, envelope: Envelope | None = None
    ) -> bool:
        assert await self._store.grant(request_id, worker_id="w1", worker_url="http://w1", now=now)
        await asyncio.wait_for(asyncio.shield(self._fut), 5.0)
        if self._fail:
            raise StateUnavailable("Timeout reading from the socket")
        return bool(await self._store.withdraw(request_id, now=now, reason=reason))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


async def _never_leaves() -> None:
    """A client's disconnect that never comes."""
    await asyncio.Event().wait()


@pytest.fixture
async def stores(redis_url: str) -> AsyncIterator[StateStores]:
    client: Redis = connect(redis_url, client_name="await-grant-tests")
    yield StateStores.build(client, KeySpace("await"))
    await client.aclose()


async def _wait(stores: StateStores, fail: bool, no_leader: bool) -> tuple[Any, Gateway]:
    """Queue one flight for real, then wait for its grant in `Gateway._await_grant` with a
    client that stays, until the queue timeout (or at once, with no leader seen)."""
    flight: Flight = flight_of({"model": "m", "prompt": "hello"})
    reporter = EventReporter(stores.completions, interval=0.01)
    waiter = GrantWaiter(stores.grants, GATEWAY, lambda grant: asyncio.sleep(0))
    flight.grant_future = fut = waiter.expect(flight.id)
    store = GrantedDuringWithdraw(stores.requests, fut, fail)
    deps = gateway_deps(store, reporter, settings=Settings(queue_timeout_s=0.2), waiter=waiter)
    gateway = Gateway(deps)
    submitted = await stores.requests.submit(
        Envelope(replace(flight.job), flight.node.weights(), GATEWAY),
        request_id=flight.id,
        tenant=flight.job.tenant,
        gateway_id=GATEWAY,
        queue_cap=9,
        now=NOW,
    )
    assert submitted.accepted
    if no_leader:
        waiter.no_leader.set()
    client = asyncio.create_task(_never_leaves())
    tasks = [asyncio.create_task(waiter.run()), asyncio.create_task(reporter.run())]
    try:
        try:
            result: Any = await gateway._await_grant(flight, client)
        except ApiError as exc:
            result = exc
        await gateway._finisher.settled()
        await reporter.flush()
    finally:  # stop_tasks: redis-py on Python 3.11 can drop a cancellation
        await stop_tasks([client, *tasks])
    return result, gateway


@pytest.mark.parametrize("no_leader", [False, True])
async def test_a_grant_that_wins_the_withdrawal_is_served_to_a_client_still_there(
    stores: StateStores, no_leader: bool
) -> None:
    """The wait ended (queue timeout, or no leader seen) and the withdrawal lost to a grant:
    the client is still connected, so it is served — before, a `no_leader` wait answered a
    bare 499 and recorded the request `aborted`."""
    result, _ = await _wait(stores, fail=False, no_leader=no_leader)
    assert isinstance(result, Grant) and result.worker_id == "w1"
    assert (await stores.requests.inflight()).keys() == {result.request_id}


async def test_a_grant_delivered_while_the_withdrawal_failed_is_released(
    stores: StateStores,
) -> None:
    """Redis failed the withdrawal after the reader had delivered the grant: the client gets
    its 503, and the grant — which no reader will ever hand to the orphan path again — is
    released, so its worker slot is not held for the gateway's lifetime."""
    result, _ = await _wait(stores, fail=True, no_leader=False)
    assert isinstance(result, ApiError) and result.status == 503
    assert await stores.requests.inflight() == {}


class RequeueFails:
    """The real request store, except that a re-queue finds Redis gone."""

    def __init__(self, store: Any) -> None:
        self._store = store

    async def requeue(self, request_id: str, *, now: float) -> bool:
        raise StateUnavailable("Timeout reading from the socket")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


async def test_a_worker_failure_whose_requeue_finds_redis_gone_is_counted_once(
    stores: StateStores,
) -> None:
    """The request is finished with `error` (counted as such) and answered 503: before, the
    answer was counted again as a Redis failure in `arbiter_gateway_failed`."""
    flight: Flight = flight_of({"model": "m", "prompt": "hello"})
    reporter = EventReporter(stores.completions, interval=0.01)
    waiter = GrantWaiter(stores.grants, GATEWAY, lambda grant: asyncio.sleep(0))
    deps = gateway_deps(RequeueFails(stores.requests), reporter, waiter=waiter)
    gateway = Gateway(deps)
    grant = Grant(flight.id, "w1", "http://w1", NOW)
    tasks = [asyncio.create_task(waiter.run()), asyncio.create_task(reporter.run())]
    try:
        with pytest.raises(ApiError) as caught:
            await gateway._worker_failed(flight, grant, "connection refused")
        await asyncio.wait_for(gateway._finisher.settled(), 10)
    finally:
        await stop_tasks(tasks)
    app = FastAPI()
    app.state.metrics = metrics = deps.metrics
    scope = {"type": "http", "app": app, "method": "POST", "path": "/v1/x", "headers": []}
    answer = error_response(caught.value, Request({**scope, "query_string": b""}))
    assert answer.status_code == 503 and caught.value.code == "state_unavailable"
    failed = {"code": "state_unavailable"}
    errors = {"tenant": hashed_tenant("acme"), "status": "error"}
    assert metrics.registry.get_sample_value("arbiter_gateway_failed_total", failed) is None
    assert metrics.registry.get_sample_value("arbiter_gateway_requests_total", errors) == 1.0
