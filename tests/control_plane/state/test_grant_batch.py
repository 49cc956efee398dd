"""Contract of RequestStore.grant_many: one scheduler cycle's grants in one script call."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from control_plane.state import GrantOrder, GrantStream, KeySpace, RequestStore, StaleLeader
from tests.support.envelopes import envelope

NOW = 1_700_000_000.5


async def _submit(store: RequestStore, rid: str, tenant: str, gateway: str = "gw1") -> None:
    result = await store.submit(
        envelope(rid, tenant, gateway=gateway),
        request_id=rid,
        tenant=tenant,
        gateway_id=gateway,
        queue_cap=1000,
        now=NOW,
    )
    assert result.accepted


async def test_a_batch_grants_the_queued_and_refuses_the_rest(
    requests: RequestStore, grants: GrantStream
) -> None:
    for rid, tenant in (("b1", "a"), ("b2", "a"), ("b3", "b")):
        await _submit(requests, rid, tenant)
    assert await requests.withdraw("b2", now=NOW, reason="client_disconnected")
    orders = [GrantOrder("b1", "w1", "http://w1"), GrantOrder("b2", "w1", "http://w1")]
    orders += [GrantOrder("b3", "w2", "http://w2"), GrantOrder("nope", "w2", "http://w2")]

    assert await requests.grant_many(orders, now=NOW + 1) == [True, False, True, False]

    assert await requests.queued_ids() == []
    assert await requests.tenant_depths() == {}
    assert await requests.inflight() == {"b1": "w1", "b3": "w2"}
    delivered = await grants.read("gw1", "0-0", block_ms=None)
    assert [(g.request_id, g.worker_id, g.granted_at) for _, g in delivered] == [
        ("b1", "w1", NOW + 1),
        ("b3", "w2", NOW + 1),
    ]
    # a retried batch (its reply lost) grants nothing twice
    assert await requests.grant_many(orders[:1], now=NOW + 2) == [True]
    assert len(await grants.read("gw1", "0-0", block_ms=None)) == 2


async def test_a_deposed_leaders_batch_changes_nothing(
    requests: RequestStore, redis: Redis, keyspace: KeySpace
) -> None:
    await _submit(requests, "f1", "a")
    await _submit(requests, "f2", "a")
    await redis.set(keyspace.leader_epoch, 7)
    orders = [GrantOrder("f1", "w", "u"), GrantOrder("f2", "w", "u")]

    with pytest.raises(StaleLeader):
        await requests.grant_many(orders, now=NOW, fencing_token=6)

    assert await requests.queued_ids() == ["f1", "f2"]
    assert await requests.grant_many(orders, now=NOW, fencing_token=7) == [True, True]


async def test_a_batch_longer_than_one_call_is_chunked(requests: RequestStore) -> None:
    ids = [f"c{i}" for i in range(300)]
    for rid in ids:
        await _submit(requests, rid, "t")
    orders = [GrantOrder(rid, "w", "u") for rid in ids]

    assert await requests.grant_many(orders, now=NOW) == [True] * 300
    assert await requests.depth() == 0
    assert await requests.grant_many([], now=NOW) == []
