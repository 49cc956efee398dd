"""Contract of RequestStore: submit, grant, withdraw, requeue, finish and the read helpers."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from control_plane.contracts.events import Withdrawn
from control_plane.contracts.grants import Grant
from control_plane.state import (
    EventStream,
    GrantStream,
    KeySpace,
    RequestStore,
    StaleLeader,
    SubmitResult,
)
from tests.support.envelopes import envelope

NOW = 1_700_000_000.25


async def submit(
    store: RequestStore, rid: str, *, tenant: str = "a", cap: int = 10, gateway: str = "gw1"
) -> SubmitResult:
    return await store.submit(
        envelope(rid, tenant, gateway=gateway),
        request_id=rid,
        tenant=tenant,
        gateway_id=gateway,
        queue_cap=cap,
        now=NOW,
    )


async def test_submit_stores_envelope_queues_in_order_and_announces(
    requests: RequestStore, redis: Redis, keyspace: KeySpace
) -> None:
    results = [await submit(requests, f"r{i}") for i in range(3)]

    assert [r.seq for r in results] == [1, 2, 3]
    assert [r.depth for r in results] == [1, 2, 3]
    assert all(r.accepted and not r.duplicate for r in results)
    record = await requests.get("r1")
    assert record is not None
    assert record.envelope == envelope("r1")
    assert (record.status, record.tenant, record.gateway) == ("queued", "a", "gw1")
    assert (record.seq, record.attempts, record.submitted_at) == (2, 1, NOW)
    assert await requests.queued_ids() == ["r0", "r1", "r2"]
    assert await requests.tenant_depths() == {"a": 3}
    assert await requests.depth() == 3
    assert await redis.xlen(keyspace.arrivals) == 3


async def test_queue_cap_rejects_without_side_effects(
    requests: RequestStore, redis: Redis, keyspace: KeySpace
) -> None:
    assert (await submit(requests, "a1", cap=2)).accepted
    assert (await submit(requests, "a2", cap=2)).accepted

    rejected = await submit(requests, "a3", cap=2)

    assert rejected == SubmitResult(accepted=False, seq=0, depth=2)
    assert await requests.get("a3") is None
    assert await redis.xlen(keyspace.arrivals) == 2
    assert (await submit(requests, "b1", tenant="b", cap=2)).seq == 3
    assert await requests.grant("a1", worker_id="w", worker_url="http://w", now=NOW)
    assert (await submit(requests, "a3", cap=2)).accepted
    assert await requests.tenant_depths() == {"a": 2, "b": 1}


async def test_resubmitting_an_id_is_a_harmless_duplicate(
    requests: RequestStore, redis: Redis, keyspace: KeySpace
) -> None:
    first = await submit(requests, "r")
    again = await submit(requests, "r")

    assert again == SubmitResult(accepted=True, seq=first.seq, depth=1, duplicate=True)
    assert await redis.xlen(keyspace.arrivals) == 1
    assert await requests.tenant_depths() == {"a": 1}


async def test_grant_moves_request_to_inflight_and_notifies_its_gateway(
    requests: RequestStore, grants: GrantStream
) -> None:
    await submit(requests, "r1", gateway="gw-7")
    await submit(requests, "r2", gateway="gw-8")

    assert await requests.grant("r1", worker_id="w1", worker_url="http://w1:8000", now=NOW + 1)

    record = await requests.get("r1")
    assert record is not None
    assert (record.status, record.worker, record.granted_at) == ("granted", "w1", NOW + 1)
    assert await requests.queued_ids() == ["r2"]
    assert await requests.inflight() == {"r1": "w1"}
    entries = await grants.read("gw-7", "0-0", block_ms=None)
    assert [grant for _, grant in entries] == [Grant("r1", "w1", "http://w1:8000", NOW + 1, 1)]
    assert await grants.read("gw-8", "0-0", block_ms=None) == []


async def test_grant_is_idempotent_for_the_same_worker_and_exclusive_otherwise(
    requests: RequestStore, grants: GrantStream
) -> None:
    await submit(requests, "r1")
    assert await requests.grant("r1", worker_id="w1", worker_url="u1", now=NOW)

    assert await requests.grant("r1", worker_id="w1", worker_url="u1", now=NOW)
    assert not await requests.grant("r1", worker_id="w2", worker_url="u2", now=NOW)
    assert not await requests.grant("unknown", worker_id="w1", worker_url="u1", now=NOW)
    assert len(await grants.read("gw1", "0-0", block_ms=None)) == 1
    assert await requests.inflight() == {"r1": "w1"}
    assert await requests.tenant_depths() == {}


async def test_withdraw_removes_a_queued_request_and_emits_an_event(
    requests: RequestStore, events: EventStream, redis: Redis, keyspace: KeySpace
) -> None:
    await submit(requests, "r1")

    assert await requests.withdraw("r1", now=NOW + 2, reason="client_disconnected")

    record = await requests.get("r1")
    assert record is not None
    assert (record.status, record.reason) == ("withdrawn", "client_disconnected")
    assert 0 < await redis.ttl(keyspace.request("r1")) <= requests.retention_s
    assert (await requests.queued_ids(), await requests.tenant_depths()) == ([], {})
    emitted = await events.read("scheduler", "s1", block_ms=None)
    assert [event for _, event in emitted] == [  # no envelope given: no row for it
        Withdrawn("r1", "client_disconnected", "a", 1, NOW + 2, 1)
    ]
    assert await requests.withdraw("r1", now=NOW + 3, reason="again")
    assert not await requests.grant("r1", worker_id="w1", worker_url="u1", now=NOW)


@pytest.mark.parametrize("attempts", ["1.5", "nan", "01", "1e400", "9" * 30])
async def test_a_withdrawal_carries_its_callers_envelope_whatever_the_hash_holds(
    requests: RequestStore,
    events: EventStream,
    redis: Redis,
    keyspace: KeySpace,
    attempts: str,
) -> None:
    """The envelope comes from the caller, not from the hash, and only plain counts are
    copied: a hash edited by hand (Lua's JSON reads `NaN`, hex and leading zeros, the events'
    readers do not) cannot make the entry unreadable, which would keep the leader from
    dropping the job."""
    await submit(requests, "r1")
    key = keyspace.request("r1")
    edited = {"envelope": '{"job": NaN, "n": 0x10}', "attempts": attempts, "seq": attempts}
    await redis.hset(key, mapping=edited)

    assert await requests.withdraw(
        "r1", now=NOW + 2, reason="queue_timeout", envelope=envelope("r1")
    )

    [(_, event)] = await events.read("scheduler", "s1", block_ms=None)
    assert event == Withdrawn("r1", "queue_timeout", "a", None, NOW + 2, 0, envelope("r1"))


async def test_withdraw_loses_to_an_earlier_grant(requests: RequestStore) -> None:
    await submit(requests, "r1")
    assert await requests.grant("r1", worker_id="w1", worker_url="u1", now=NOW)

    assert not await requests.withdraw("r1", now=NOW, reason="client_disconnected")

    record = await requests.get("r1")
    assert record is not None and record.status == "granted"
    assert await requests.inflight() == {"r1": "w1"}


async def test_requeue_keeps_the_original_place_once(
    requests: RequestStore, grants: GrantStream, redis: Redis, keyspace: KeySpace
) -> None:
    for rid in ("r1", "r2", "r3"):
        await submit(requests, rid)
    assert await requests.grant("r1", worker_id="w1", worker_url="u1", now=NOW)

    assert await requests.requeue("r1", now=NOW + 1)

    assert await requests.queued_ids() == ["r1", "r2", "r3"]
    assert await requests.tenant_depths() == {"a": 3}
    assert await requests.inflight() == {}
    record = await requests.get("r1")
    assert record is not None
    assert (record.status, record.attempts, record.prev_worker) == ("queued", 2, "w1")
    assert record.worker == ""
    assert await redis.xlen(keyspace.arrivals) == 4
    assert await requests.grant("r1", worker_id="w2", worker_url="u2", now=NOW + 2)
    attempts = [g.attempt for _, g in await grants.read("gw1", "0-0", block_ms=None)]
    assert attempts == [1, 2]
    assert not await requests.requeue("r1", now=NOW + 3)
    record = await requests.get("r1")
    assert record is not None and (record.status, record.worker) == ("granted", "w2")


async def test_requeue_is_idempotent_and_only_for_granted(requests: RequestStore) -> None:
    await submit(requests, "r1")
    assert not await requests.requeue("r1", now=NOW)
    assert await requests.grant("r1", worker_id="w1", worker_url="u1", now=NOW)

    assert await requests.requeue("r1", now=NOW + 1)
    assert await requests.requeue("r1", now=NOW + 1)

    record = await requests.get("r1")
    assert record is not None and record.attempts == 2
    assert await requests.tenant_depths() == {"a": 1}
    assert not await requests.requeue("missing", now=NOW)


async def test_a_retried_requeue_still_answers_after_the_request_was_granted_again(
    requests: RequestStore,
) -> None:
    """The first call ran but its reply was lost (a reset); by the time the multiplexer resends
    it the leader has granted the request again. The resend must answer 1, as its first run
    did — a 0 would make the gateway fail a request whose retry is under way."""
    await submit(requests, "r1")
    assert await requests.grant("r1", worker_id="w1", worker_url="u1", now=NOW)
    assert await requests.requeue("r1", now=NOW + 1)
    assert await requests.grant("r1", worker_id="w2", worker_url="u2", now=NOW + 2)

    assert await requests.requeue("r1", now=NOW + 1)

    record = await requests.get("r1")
    assert record is not None and (record.status, record.worker, record.attempts) == (
        "granted",
        "w2",
        2,
    )
    assert await requests.inflight() == {"r1": "w2"}


async def test_finish_is_final_idempotent_and_expires(
    requests: RequestStore, redis: Redis, keyspace: KeySpace
) -> None:
    await submit(requests, "r1")
    assert await requests.grant("r1", worker_id="w1", worker_url="u1", now=NOW)

    assert await requests.finish("r1", now=NOW + 5, status="ok")
    assert await requests.finish("r1", now=NOW + 6, status="ok")
    assert not await requests.finish("r1", now=NOW + 6, status="error")

    record = await requests.get("r1")
    assert record is not None
    assert (record.status, record.finished_at) == ("ok", NOW + 5)
    assert await requests.inflight() == {}
    assert 0 < await redis.ttl(keyspace.request("r1")) <= requests.retention_s
    assert not await requests.finish("missing", now=NOW, status="ok")
    with pytest.raises(ValueError, match="final status"):
        await requests.finish("r1", now=NOW, status="withdrawn")


async def test_finish_of_a_queued_request_frees_its_queue_slot(requests: RequestStore) -> None:
    await submit(requests, "r1")
    await submit(requests, "r2")

    assert await requests.finish("r1", now=NOW, status="error")

    assert (await requests.queued_ids(), await requests.tenant_depths()) == (["r2"], {"a": 1})
    assert await requests.withdraw("r2", now=NOW, reason="queue_timeout")
    assert not await requests.finish("r2", now=NOW, status="timeout")


async def test_load_queued_returns_records_in_arrival_order(requests: RequestStore) -> None:
    for i, tenant in enumerate(["a", "b", "a", "c"]):
        await submit(requests, f"r{i}", tenant=tenant)
    assert await requests.grant("r1", worker_id="w1", worker_url="u1", now=NOW)

    records = await requests.load_queued()

    assert [(r.id, r.tenant, r.seq) for r in records] == [
        ("r0", "a", 1),
        ("r2", "a", 3),
        ("r3", "c", 4),
    ]
    assert records[0].envelope is not None and records[0].envelope.job.n_in == 7
    assert [r.id for r in await requests.load_many(["r3", "nope", "r1"])] == ["r3", "r1"]


async def test_the_takeover_view_shows_queue_flight_and_arrivals_at_one_moment(
    requests: RequestStore, redis: Redis, keyspace: KeySpace
) -> None:
    assert (await requests.takeover_view()).arrivals_tail == "0-0"  # no stream yet
    for rid in ("r0", "r1", "r2", "r3"):
        await submit(requests, rid)
    assert await requests.grant("r1", worker_id="w1", worker_url="u1", now=NOW)
    assert await requests.grant("r2", worker_id="w2", worker_url="u2", now=NOW)
    assert await requests.requeue("r2", now=NOW)  # back in the queue, out of flight
    assert await requests.withdraw("r3", now=NOW, reason="client_disconnected")

    view = await requests.takeover_view()

    assert view.inflight == {"r1": "w1"}
    assert [r.id for r in view.queued] == ["r0", "r2"]
    [(last, _)] = await redis.xrevrange(keyspace.arrivals, count=1)
    assert view.arrivals_tail == last  # the re-queue of r2 was the last announced


async def test_grant_is_fenced_by_the_latest_lease_token(
    requests: RequestStore, redis: Redis, keyspace: KeySpace
) -> None:
    """A deposed leader's grant (an older fencing token) changes nothing, in the same script."""
    await submit(requests, "f1")
    await redis.set(keyspace.leader_epoch, 7)

    with pytest.raises(StaleLeader):
        await requests.grant("f1", worker_id="w", worker_url="u", now=NOW, fencing_token=6)

    record = await requests.get("f1")
    assert record is not None and record.status == "queued"
    assert await requests.queued_ids() == ["f1"]
    assert await requests.grant("f1", worker_id="w", worker_url="u", now=NOW, fencing_token=7)
    granted = await requests.get("f1")
    assert granted is not None and granted.status == "granted"


async def test_a_withdrawal_whose_hash_lost_its_tenant_is_still_announced(
    requests: RequestStore, events: EventStream, redis: Redis, keyspace: KeySpace
) -> None:
    """Before, the per-tenant count's update raised after the status was written, so the
    request was withdrawn with no event: the leader kept the job."""
    await submit(requests, "r1")
    await redis.hdel(keyspace.request("r1"), "tenant")

    assert await requests.withdraw("r1", now=NOW + 2, reason="queue_timeout")

    [(_, event)] = await events.read("scheduler", "s1", block_ms=None)
    assert isinstance(event, Withdrawn) and (event.id, event.tenant) == ("r1", None)
