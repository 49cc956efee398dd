"""The fast lane's scripts against a real redis-server: lend, take (in submit), reclaim.

What must hold: a gateway's submit takes a lent slot only while nothing of the model is
queued; slots are never taken twice nor beyond what was lent, whatever the concurrency and
the number of gateway connections; a slot is either taken or reclaimed, never both; a deposed
leader can neither lend nor reclaim; a new leader takes back every slot its predecessor lent;
a repeated lend or reclaim (lost reply) is applied once; a repeated submit whose first run took
a slot answers that take again; a submit that failed without an answer can be abandoned, so
that it either never takes effect or is reported for the gateway to end.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter

import pytest
from redis.asyncio import Redis

from control_plane.contracts.events import Complete
from control_plane.state import (
    KeySpace,
    LentSlots,
    RequestStore,
    StaleLeader,
    StateStores,
    SubmitResult,
    connect,
)
from control_plane.state.fast_lane import Loan
from control_plane.state.inflight_view import NO_ENTRY
from tests.support.envelopes import envelope

NOW = 1_700_000_000.0
MODEL = "default"  # the model of `envelope()`'s jobs


async def _leader(stores: StateStores, holder: str = "s1") -> int:
    assert await stores.lease.acquire(holder, 30.0, NOW, fresh=True)
    assert stores.lease.token is not None
    return stores.lease.token


async def _submit(
    requests: RequestStore, rid: str, *, gateway: str = "gw", cap: int = 1000
) -> SubmitResult:
    return await requests.submit(
        envelope(rid, gateway=gateway),
        request_id=rid,
        tenant="a",
        gateway_id=gateway,
        queue_cap=cap,
        now=NOW,
        fast=True,
    )


async def test_a_lent_slot_grants_at_once_and_the_arrival_says_so(
    stores: StateStores, requests: RequestStore
) -> None:
    token = await _leader(stores)
    await stores.lending.lend(MODEL, [Loan("w1", "http://w1", 1)], fencing_token=token, seq=1)
    await stores.arrivals.ensure_group()

    first = await _submit(requests, "r1")
    second = await _submit(requests, "r2")

    assert first.accepted and first.grant is not None
    assert (first.grant.request_id, first.grant.worker_id, first.grant.worker_url) == (
        "r1",
        "w1",
        "http://w1",
    )
    record = await requests.get("r1")
    assert record is not None and record.status == "granted" and record.worker == "w1"
    assert await requests.inflight() == {"r1": "w1"}
    assert second.accepted and second.grant is None  # no slot left: queued as before
    assert await requests.queued_ids() == ["r2"]
    assert await stores.lending.lent() == {}
    take, queued = (await stores.arrivals.read_after(NO_ENTRY, block_ms=None)).arrivals
    assert (take.id, take.worker, take.lent_by, take.envelope is not None) == (
        "r1",
        "w1",
        token,
        True,
    )
    assert (queued.id, queued.worker) == ("r2", None)


async def test_nothing_is_taken_while_the_model_has_a_request_queued(
    stores: StateStores, requests: RequestStore
) -> None:
    token = await _leader(stores)
    await _submit(requests, "r1")  # nothing lent: queued
    await stores.lending.lend(MODEL, [Loan("w1", "http://w1", 4)], fencing_token=token, seq=1)

    assert (await _submit(requests, "r2")).grant is None  # r1 still waits: the leader decides
    assert await stores.lending.queued_by_model() == {MODEL: 2}
    assert await requests.grant("r1", worker_id="w2", worker_url="u", now=NOW)
    assert await requests.withdraw("r2", now=NOW, reason="client_disconnected")
    assert await stores.lending.queued_by_model() == {}

    assert (await _submit(requests, "r3")).grant is not None  # the model's queue is empty again
    assert await stores.lending.lent() == {MODEL: {"w1": 3}}


async def test_concurrent_takes_from_several_gateways_never_exceed_what_was_lent(
    redis_url: str, stores: StateStores, keyspace: KeySpace
) -> None:
    token = await _leader(stores)
    loans = [Loan("w1", "http://w1", 7), Loan("w2", "http://w2", 5)]
    await stores.lending.lend(MODEL, loans, fencing_token=token, seq=1)
    clients = [connect(redis_url, client_name=f"gw{i}") for i in range(4)]
    gateways = [StateStores.build(c, keyspace).requests for c in clients]
    try:
        results = await asyncio.gather(
            *(_submit(gateways[i % 4], f"r{i}", gateway=f"gw{i % 4}") for i in range(120))
        )
    finally:
        for c in clients:
            await c.aclose()

    taken = Counter(r.grant.worker_id for r in results if r.grant is not None)
    assert taken == {"w1": 7, "w2": 5}
    assert all(r.accepted for r in results)
    inflight = await stores.requests.inflight()
    assert Counter(inflight.values()) == taken
    assert len(await stores.requests.queued_ids()) == 120 - 12
    assert await stores.lending.lent() == {}


@pytest.mark.parametrize("seed", range(5))
async def test_a_slot_is_either_taken_or_reclaimed_never_both(
    stores: StateStores, requests: RequestStore, seed: int
) -> None:
    token = await _leader(stores)
    rng = random.Random(seed)
    lent = rng.randrange(1, 20)
    await stores.lending.lend(MODEL, [Loan("w1", "http://w1", lent)], fencing_token=token, seq=1)

    async def take(i: int) -> bool:
        await asyncio.sleep(rng.random() / 1000)
        return (await _submit(requests, f"r{i}")).grant is not None

    async def reclaim() -> int:
        await asyncio.sleep(rng.random() / 1000)
        back = await stores.lending.reclaim([MODEL], fencing_token=token, seq=2)
        return back.get((MODEL, "w1"), 0)

    *takes, back = await asyncio.gather(*(take(i) for i in range(30)), reclaim())
    assert sum(takes) + back == lent
    assert len(await requests.inflight()) == sum(takes)
    assert await stores.lending.lent() == {}


async def test_a_deposed_leader_can_neither_lend_nor_reclaim(stores: StateStores) -> None:
    old = await _leader(stores, "s1")
    await stores.lending.lend(MODEL, [Loan("w1", "http://w1", 2)], fencing_token=old, seq=1)
    await stores.lease.release("s1")
    new = await _leader(stores, "s2")
    assert new > old

    with pytest.raises(StaleLeader):
        await stores.lending.lend(MODEL, [Loan("w1", "http://w1", 5)], fencing_token=old, seq=2)
    with pytest.raises(StaleLeader):
        await stores.lending.reclaim(None, fencing_token=old, seq=3)
    assert await stores.lending.lent() == {MODEL: {"w1": 2}}


async def test_a_new_leader_takes_back_what_its_predecessor_lent(
    stores: StateStores, requests: RequestStore
) -> None:
    old = await _leader(stores, "s1")
    loans = [Loan("w1", "http://w1", 2), Loan("w2", "http://w2", 1)]
    await stores.lending.lend(MODEL, loans, fencing_token=old, seq=1)
    await stores.lending.lend("other", [Loan("w3", "http://w3", 4)], fencing_token=old, seq=2)
    await stores.arrivals.ensure_group()
    assert (await _submit(requests, "before")).grant is not None
    await stores.lease.release("s1")
    new = await _leader(stores, "s2")

    back = await stores.lending.reclaim(None, fencing_token=new, seq=1)

    assert back == {(MODEL, "w1"): 1, (MODEL, "w2"): 1, ("other", "w3"): 4}
    assert await stores.lending.lent() == {}
    assert (await _submit(requests, "after")).grant is None
    assert set(await requests.inflight()) == {"before"}  # what the new leader's rebuild reads
    take, _ = (await stores.arrivals.read_after(NO_ENTRY, block_ms=None)).arrivals
    assert (take.id, take.lent_by) == ("before", old)  # the predecessor's take: not adopted


async def test_a_repeated_call_is_applied_once(stores: StateStores, requests: RequestStore) -> None:
    token = await _leader(stores)
    loans = [Loan("w1", "http://w1", 3)]
    await stores.lending.lend(MODEL, loans, fencing_token=token, seq=1)
    await stores.lending.lend(MODEL, loans, fencing_token=token, seq=1)  # the reply was lost
    assert await stores.lending.lent() == {MODEL: {"w1": 3}}
    assert (await _submit(requests, "r1")).grant is not None

    first = await stores.lending.reclaim([MODEL], fencing_token=token, seq=2)
    again = await stores.lending.reclaim([MODEL], fencing_token=token, seq=2)
    assert first == again == {(MODEL, "w1"): 2}
    await stores.lending.lend(MODEL, loans, fencing_token=token, seq=3)
    assert await stores.lending.lent() == {MODEL: {"w1": 3}}


async def test_a_repeated_submit_answers_its_take_again_and_takes_nothing_more(
    stores: StateStores, requests: RequestStore
) -> None:
    """The first reply was lost (a connection reset, and the client sent the call again): the
    gateway must learn its worker, for no grant message ever tells it of a take."""
    token = await _leader(stores)
    await stores.lending.lend(MODEL, [Loan("w1", "http://w1", 2)], fencing_token=token, seq=1)
    await stores.arrivals.ensure_group()
    first = await _submit(requests, "r1")

    again = await _submit(requests, "r1")

    assert first.grant is not None and again.grant is not None
    assert (again.grant.worker_id, again.grant.worker_url, again.seq) == (
        "w1",
        "http://w1",
        first.seq,
    )
    assert not again.duplicate
    assert await stores.lending.lent() == {MODEL: {"w1": 1}}  # one slot taken, not two
    assert await requests.inflight() == {"r1": "w1"}
    read = await stores.arrivals.read_after(NO_ENTRY, block_ms=None)
    assert [e.id for e in read.arrivals] == ["r1"]
    other = await _submit(requests, "r1", gateway="gw2")  # not that gateway's call: a duplicate
    assert other.duplicate and other.grant is None


async def test_a_repeated_submit_of_a_queued_or_requeued_request_is_a_duplicate(
    stores: StateStores, requests: RequestStore
) -> None:
    token = await _leader(stores)
    assert (await _submit(requests, "q")).grant is None  # nothing lent: queued
    assert (await _submit(requests, "q")).duplicate
    await stores.lending.lend(MODEL, [Loan("w1", "http://w1", 1)], fencing_token=token, seq=1)
    assert await requests.grant("q", worker_id="w2", worker_url="http://w2", now=NOW)
    again = await _submit(requests, "q")  # the leader's grant: its message tells the gateway
    assert again.duplicate and again.grant is None
    taken = await _submit(requests, "t")
    assert taken.grant is not None
    assert await requests.requeue("t", now=NOW)  # its worker failed: back in the queue
    assert await requests.grant("t", worker_id="w2", worker_url="http://w2", now=NOW)
    requeued = await _submit(requests, "t")  # granted again, by the leader: a duplicate
    assert requeued.duplicate and requeued.grant is None


async def test_an_abandoned_submit_that_never_ran_can_never_take_effect(
    stores: StateStores, requests: RequestStore
) -> None:
    token = await _leader(stores)
    await stores.lending.lend(MODEL, [Loan("w1", "http://w1", 1)], fencing_token=token, seq=1)

    result = await requests.abandon("r1", gateway_id="gw", now=NOW)
    late = await _submit(requests, "r1")  # the call still in Redis's buffers runs now

    assert (result.outcome, result.grant) == ("absent", None)
    assert late.duplicate and late.grant is None
    assert await stores.lending.lent() == {MODEL: {"w1": 1}}  # nothing taken
    assert await requests.queued_ids() == [] and await requests.inflight() == {}
    record = await requests.get("r1")
    assert record is not None
    assert (record.status, record.reason, record.gateway) == ("withdrawn", "submit_failed", "gw")
    assert (await requests.abandon("r1", gateway_id="gw", now=NOW)).outcome == "other"


async def test_an_abandoned_submit_that_ran_is_reported_for_its_gateway_to_end(
    stores: StateStores, requests: RequestStore
) -> None:
    token = await _leader(stores)
    await stores.lending.lend(MODEL, [Loan("w1", "http://w1", 1)], fencing_token=token, seq=1)
    assert (await _submit(requests, "t")).grant is not None
    assert (await _submit(requests, "q3")).grant is None  # no slot left: queued

    taken = await requests.abandon("t", gateway_id="gw", now=NOW)
    queued = await requests.abandon("q3", gateway_id="gw", now=NOW)
    elsewhere = await requests.abandon("q3", gateway_id="gw2", now=NOW)

    assert taken.outcome == "taken" and taken.grant is not None
    assert (taken.grant.request_id, taken.grant.worker_id, taken.grant.worker_url) == (
        "t",
        "w1",
        "http://w1",
    )
    assert (queued.outcome, queued.grant) == ("queued", None)
    assert elsewhere.outcome == "other"
    assert await requests.status("t") == "granted"  # reported only: the gateway ends it
    assert await requests.status("q3") == "queued"


async def test_a_lost_gateways_fast_request_is_released_like_any_granted_one(
    stores: StateStores, requests: RequestStore, redis: Redis, keyspace: KeySpace
) -> None:
    token = await _leader(stores)
    await stores.lending.lend(MODEL, [Loan("w1", "http://w1", 1)], fencing_token=token, seq=1)
    assert (await _submit(requests, "r1", gateway="gone")).grant is not None
    event = Complete("r1", "aborted", finished=NOW)

    status = await requests.release_lost(
        "r1", gateway_id="gone", now=NOW, reason="gone", if_queued=event, if_granted=event
    )

    assert status == "aborted"
    assert await requests.inflight() == {}
    assert await redis.hgetall(keyspace.model_queued) == {}


async def test_lent_slots_are_refused_for_a_bad_loan(stores: StateStores) -> None:
    token = await _leader(stores)
    with pytest.raises(ValueError, match="at least one slot"):
        await stores.lending.lend(MODEL, [Loan("w1", "u", 0)], fencing_token=token, seq=1)
    with pytest.raises(ValueError, match="at least one"):
        await stores.lending.lend(MODEL, [], fencing_token=token, seq=1)
    assert isinstance(stores.lending, LentSlots)
