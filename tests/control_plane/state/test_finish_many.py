"""Contract of RequestStore.finish_many: a gateway's finished flights marked in one script call,
each exactly as `finish` would mark it alone."""

from __future__ import annotations

from typing import Any

import pytest
from redis.asyncio import Redis

from control_plane.state import GrantOrder, KeySpace, RequestStore, StateStores
from tests.support.envelopes import envelope

NOW = 1_700_000_000.5
ITEMS = [
    ("granted-ok", "ok"),
    ("granted-error", "error"),
    ("queued-aborted", "aborted"),
    ("withdrawn", "ok"),  # ended otherwise already: 0, unchanged
    ("twice", "ok"),  # the same status again: 1, unchanged
    ("unknown", "ok"),
]


async def _history(store: RequestStore) -> None:
    """The same requests in the same states: granted, queued, withdrawn, finished."""
    for rid in ("granted-ok", "granted-error", "queued-aborted", "withdrawn", "twice"):
        result = await store.submit(
            envelope(rid, "acme"), request_id=rid, tenant="acme", gateway_id="gw",
            queue_cap=100, now=NOW,
        )  # fmt: skip
        assert result.accepted
    orders = [GrantOrder(r, "w1", "http://w1") for r in ("granted-ok", "granted-error", "twice")]
    assert await store.grant_many(orders, now=NOW) == [True, True, True]
    assert await store.withdraw("withdrawn", now=NOW, reason="client_disconnected")
    assert await store.finish("twice", now=NOW, status="ok")


async def _state(store: RequestStore, redis: Redis, ks: KeySpace) -> dict[str, Any]:
    hashes = {}
    for rid, _ in ITEMS:
        fields = await redis.hgetall(ks.request(rid))
        fields.pop("submitted", None)
        hashes[rid] = (
            fields.get("status"),
            fields.get("finished_at"),
            await redis.ttl(ks.request(rid)),
        )
    return {
        "hashes": hashes,
        "queued": await store.queued_ids(),
        "tenants": await store.tenant_depths(),
        "inflight": await store.inflight(),
    }


async def test_one_call_marks_each_item_as_finish_alone_would(redis: Redis) -> None:
    one, alone = KeySpace("finish-many"), KeySpace("finish-alone")
    many_store = StateStores.build(redis, one).requests
    alone_store = StateStores.build(redis, alone).requests
    await _history(many_store)
    await _history(alone_store)

    together = await many_store.finish_many(ITEMS, now=NOW + 1)
    separate = [await alone_store.finish(r, now=NOW + 1, status=s) for r, s in ITEMS]

    assert together == separate == [True, True, True, False, True, False]
    assert await _state(many_store, redis, one) == await _state(alone_store, redis, alone)
    assert await many_store.inflight() == {} and await many_store.queued_ids() == []


async def test_a_bad_status_is_refused_before_anything_changes(requests: RequestStore) -> None:
    with pytest.raises(ValueError, match="final status"):
        await requests.finish_many([("a", "ok"), ("b", "done")], now=NOW)
