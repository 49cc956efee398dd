"""A gateway the leader considered lost that comes back (a long pause, a partition), against a
real redis-server and the real scripts: it neither submits again a request the leader released
meanwhile, nor opens a worker for a grant the leader has released since."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import pytest
from redis.asyncio import Redis

from control_plane.contracts.grants import Grant
from control_plane.contracts.requests import Envelope
from control_plane.core.ledger import Ledger
from control_plane.gateway.errors import ApiError
from control_plane.gateway.grants import GrantWaiter
from control_plane.gateway.heartbeat import Liveness, beat_once
from control_plane.gateway.reporter import EventReporter
from control_plane.gateway.service import Gateway
from control_plane.gateway.submit import resubmit_if_lost, submit_flight
from control_plane.scheduler.rebuild import build_core
from control_plane.scheduler.sweeper import GatewaySweeper
from control_plane.state import KeySpace, StateStores, connect
from tests.control_plane.gateway.test_abandon import GATEWAY, gateway_deps
from tests.control_plane.gateway.test_door import flight_of

NOW = 1_700_000_000.0


@pytest.fixture
async def stores(redis_url: str) -> AsyncIterator[StateStores]:
    client: Redis = connect(redis_url, client_name="lost-gateway-tests")
    s = StateStores.build(client, KeySpace("lost-gw"))
    await s.events.ensure_groups()
    yield s
    await client.aclose()


async def _queued(stores: StateStores) -> Any:
    flight = flight_of({"model": "m", "prompt": "hello"})
    flight.envelope = Envelope(replace(flight.job), flight.node.weights(), GATEWAY)
    await stores.gateways.beat(GATEWAY, ttl_s=5, now=NOW)
    submitted = await stores.requests.submit(
        flight.envelope, request_id=flight.id, tenant=flight.job.tenant, gateway_id=GATEWAY,
        queue_cap=9, now=NOW,
    )  # fmt: skip
    assert submitted.accepted
    return flight


async def _released_as_lost(stores: StateStores) -> list[str]:
    """The gateway's liveness expires and the leader's sweeper releases its requests."""
    await stores.gateways.leave(GATEWAY)
    core = build_core({}, Ledger(), "fcfs")
    return [r.status for r in await GatewaySweeper(stores, confirm_s=0.0).sweep(core, NOW + 8)]


async def test_a_request_released_while_its_gateway_looked_lost_is_not_submitted_again(
    stores: StateStores,
) -> None:
    """Regression: the waiting flight's check resubmitted it once its ended hash expired, so
    a request whose row says `withdrawn` (gateway lost) was queued again and served."""
    flight = await _queued(stores)
    assert await _released_as_lost(stores) == ["withdrawn"]
    deps = gateway_deps(stores.requests, EventReporter(stores.completions))

    assert await resubmit_if_lost(deps, flight) is True  # the wait is over: 503
    assert await stores.requests.status(flight.id) == "withdrawn"
    assert await stores.requests.queued_ids() == []


async def _waiting(stores: StateStores) -> tuple[Any, Any]:
    """A flight submitted as the gateway submits (`submit_flight`) after its first beat."""
    deps = gateway_deps(stores.requests, EventReporter(stores.completions))
    assert await beat_once(stores.gateways, GATEWAY, 5.0, deps.liveness)
    flight = flight_of({"model": "m", "prompt": "hello"})
    waiter = GrantWaiter(stores.grants, GATEWAY, _never)
    await submit_flight(deps, waiter, flight, lambda *_: None)
    return deps, flight


async def _never(grant: Grant) -> None:
    raise AssertionError(f"no grant expected: {grant}")


async def test_a_released_request_whose_ended_hash_expired_is_not_submitted_again(
    stores: StateStores,
) -> None:
    """Regression: once the ended hash expired (a minute after its row), the waiting flight's
    check found Redis knew nothing of it and submitted it again, as one a restarted Redis lost:
    queued again and served, its row saying `withdrawn` (gateway lost)."""
    deps, flight = await _waiting(stores)
    assert await _released_as_lost(stores) == ["withdrawn"]
    await stores.redis.delete(stores.keyspace.request(flight.id))  # its retention ran out
    assert await beat_once(stores.gateways, GATEWAY, 5.0, deps.liveness)  # back: it was lost

    assert await resubmit_if_lost(deps, flight) is True  # the wait is over: 503
    assert await stores.requests.queued_ids() == []
    assert await stores.requests.status(flight.id) is None


@pytest.mark.parametrize("beat_since", [False, True])
async def test_a_request_lost_with_redis_s_data_is_still_submitted_again(
    stores: StateStores, beat_since: bool
) -> None:
    """Redis restarted empty while the gateway was cut off (it looks lost as well): the data
    marker went with the data (and a beat since wrote a new one), so it is submitted again."""
    deps, flight = await _waiting(stores)
    await stores.redis.flushdb()
    if beat_since:
        assert await beat_once(stores.gateways, GATEWAY, 5.0, deps.liveness)
    else:
        deps.liveness.beaten(time.monotonic() - 6.0, was_alive=True)  # silent since: suspect
    assert deps.liveness.suspect(flight.liveness_epoch)

    assert await resubmit_if_lost(deps, flight) is False
    assert await stores.requests.status(flight.id) == "queued"  # submitted again


async def test_a_request_still_queued_or_lost_by_redis_is_left_or_submitted_again(
    stores: StateStores,
) -> None:
    flight = await _queued(stores)
    deps = gateway_deps(stores.requests, EventReporter(stores.completions))
    assert await resubmit_if_lost(deps, flight) is False  # still queued: wait on
    await stores.redis.delete(stores.keyspace.request(flight.id))  # a Redis that lost it
    await stores.redis.delete(stores.keyspace.queued)
    assert await resubmit_if_lost(deps, flight) is False
    assert await stores.requests.status(flight.id) == "queued"  # submitted again


async def test_a_grant_released_since_it_was_read_is_refused_not_opened(
    stores: StateStores,
) -> None:
    """Regression: a grant the reader delivered after the pause was served though the leader
    had released the request (its slot granted to another: the worker over-committed)."""
    flight = await _queued(stores)
    assert await stores.requests.grant(flight.id, worker_id="w1", worker_url="http://w1", now=NOW)
    grant = Grant(flight.id, "w1", "http://w1", NOW)
    gateway = Gateway(gateway_deps(stores.requests, EventReporter(stores.completions)))
    await gateway._still_granted(flight, grant)  # still granted here: opened

    assert await _released_as_lost(stores) == ["aborted"]
    with pytest.raises(ApiError) as refused:
        await gateway._still_granted(flight, grant)
    assert refused.value.status == 503


def test_liveness_is_suspect_after_a_loss_or_a_silence_as_long_as_the_liveness() -> None:
    live = Liveness(dead_after_s=5.0)
    assert live.suspect(0)  # no beat answered: a submit may have registered it (submit.lua)
    live.beaten(time.monotonic(), was_alive=False)  # the first beat registers it
    epoch = live.epoch
    assert not live.suspect(epoch)
    live.beaten(time.monotonic() - 6.0, was_alive=True)  # no beat answered for 6 s
    assert live.suspect(epoch)
    live.beaten(time.monotonic(), was_alive=False)  # it had been considered lost
    assert live.suspect(epoch)  # for what was submitted before
    assert not live.suspect(live.epoch)  # not for what comes after


def test_liveness_is_suspect_when_the_beat_that_found_it_lost_lost_its_reply() -> None:
    """Regression: the beat that registered the replica again ran in Redis but its reply was
    lost, and the next answered beat said `alive`: nothing was suspect any more, and a grant
    the sweeper had released was opened."""
    live = Liveness(dead_after_s=5.0)
    now = time.monotonic()
    live.beaten(now - 22.0, was_alive=False)  # registered
    epoch = live.epoch
    live.beaten(now, was_alive=True)  # 22 s later: what happened between is unknown
    assert live.suspect(epoch)
    assert not live.suspect(live.epoch)
