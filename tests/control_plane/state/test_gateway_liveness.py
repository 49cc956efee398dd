"""Contract of gateway liveness (GatewayRegistry) and of releasing a lost gateway's requests."""

from __future__ import annotations

import asyncio

from redis.asyncio import Redis

from control_plane.contracts.events import Complete
from control_plane.state import EventStream, KeySpace, RequestStore, StateStores
from tests.support.envelopes import envelope

NOW = 1_700_000_000.5
REASON = "gateway gw-dead lost"


def _event(rid: str, status: str) -> Complete:
    return Complete(rid, status, finished=NOW + 10, error=REASON)


async def _submit(requests: RequestStore, rid: str, gateway: str, tenant: str = "a") -> None:
    result = await requests.submit(
        envelope(rid),
        request_id=rid,
        tenant=tenant,
        gateway_id=gateway,
        queue_cap=99,
        now=NOW,
    )
    assert result.accepted


async def _release(requests: RequestStore, rid: str, gateway: str = "gw-dead") -> str | None:
    return await requests.release_lost(
        rid,
        gateway_id=gateway,
        now=NOW + 10,
        reason=REASON,
        if_queued=_event(rid, "withdrawn"),
        if_granted=_event(rid, "aborted"),
    )


async def _completions(events: EventStream) -> list[Complete]:
    entries = await events.read("recorder", "c", count=1000, block_ms=None)
    return [event for _, event in entries if isinstance(event, Complete)]


# -- heartbeat -------------------------------------------------------------------------------


async def test_beat_registers_and_keeps_a_replica_alive(stores: StateStores) -> None:
    gateways = stores.gateways

    assert not await gateways.beat("gw1", ttl_s=5, now=NOW)  # first beat
    assert await gateways.beat("gw1", ttl_s=5, now=NOW + 1)

    assert await gateways.is_alive("gw1")
    assert await gateways.registered() == {"gw1": NOW + 1}
    assert await gateways.lost() == []


async def test_a_silent_replica_is_lost_once_its_liveness_expires(stores: StateStores) -> None:
    gateways = stores.gateways
    await gateways.beat("slow", ttl_s=0.15, now=NOW)
    await gateways.beat("steady", ttl_s=5, now=NOW)

    await asyncio.sleep(0.1)
    assert await gateways.lost() == []  # silent, but not for long enough yet
    await asyncio.sleep(0.15)

    assert await gateways.lost() == ["slow"]
    assert not await gateways.beat("slow", ttl_s=5, now=NOW + 1)  # it learns it was lost
    assert await gateways.lost() == []


async def test_leave_makes_a_replica_lost_at_once_and_unknown_ids_never_are(
    stores: StateStores,
) -> None:
    gateways = stores.gateways
    await gateways.beat("gw1", ttl_s=5, now=NOW)

    await gateways.leave("gw1")
    await gateways.leave("never-seen")

    assert await gateways.lost() == ["gw1"]
    assert not await gateways.is_alive("gw1")


async def test_forget_drops_only_lost_replicas_with_their_grants_stream(
    stores: StateStores, redis: Redis, keyspace: KeySpace
) -> None:
    gateways = stores.gateways
    await gateways.beat("alive", ttl_s=5, now=NOW)
    await gateways.beat("dead", ttl_s=5, now=NOW)
    await _submit(stores.requests, "r1", "dead")
    assert await stores.requests.grant("r1", worker_id="w", worker_url="u", now=NOW)
    assert await redis.exists(keyspace.grants("dead"))
    await gateways.leave("dead")

    assert await gateways.lost_scores() == {"dead": NOW}

    assert not await gateways.forget("alive", score=NOW)
    assert not await gateways.forget("dead", score=NOW - 1)  # not the score the sweep read
    assert await gateways.forget("dead", score=NOW)
    assert not await gateways.forget("dead", score=NOW)

    assert await gateways.registered() == {"alive": NOW}
    assert not await redis.exists(keyspace.grants("dead"))
    assert await gateways.lost() == []


async def test_a_submit_without_liveness_registers_its_replica_above_the_read_score(
    stores: StateStores,
) -> None:
    """A replica considered lost (or already forgotten) that stores a request is registered
    again, its score raised even when its clock is behind: the sweep's `forget` with the
    score it read is refused, and the replica is reported lost until it beats."""
    gateways = stores.gateways
    await gateways.beat("gw", ttl_s=5, now=NOW)
    await gateways.leave("gw")
    seen = await gateways.lost_scores()
    assert seen == {"gw": NOW}

    await _submit(stores.requests, "r1", "gw")  # its clock says NOW: not after its last beat

    assert (await gateways.registered())["gw"] > NOW
    assert not await gateways.forget("gw", score=seen["gw"])
    assert await gateways.lost() == ["gw"]
    await gateways.beat("gw", ttl_s=5, now=NOW + 1)
    await _submit(stores.requests, "r2", "gw")  # alive: the registry is left as it is
    assert await gateways.registered() == {"gw": NOW + 1}


async def test_liveness_keys_share_the_cluster_prefix(
    stores: StateStores, redis: Redis, keyspace: KeySpace
) -> None:
    await stores.gateways.beat("gw1", ttl_s=5, now=NOW)

    keys = {key async for key in redis.scan_iter(count=100)}

    assert keys == {keyspace.gateways, keyspace.gateway_alive("gw1")}
    assert all(key.startswith(keyspace.prefix) for key in keys)


# -- finding and releasing a lost replica's requests -----------------------------------------


async def test_owned_by_lists_queued_then_granted_requests_of_the_given_replicas(
    requests: RequestStore,
) -> None:
    for rid, gateway in [("q1", "gw-dead"), ("x1", "gw-ok"), ("g1", "gw-dead"), ("q2", "gw-dead")]:
        await _submit(requests, rid, gateway)
    await _submit(requests, "done", "gw-dead")
    assert await requests.grant("g1", worker_id="w", worker_url="u", now=NOW)
    assert await requests.grant("done", worker_id="w", worker_url="u", now=NOW)
    assert await requests.finish("done", now=NOW, status="ok")

    owned = await requests.owned_by(["gw-dead"])

    assert [(r.id, r.status) for r in owned] == [
        ("q1", "queued"),
        ("q2", "queued"),
        ("g1", "granted"),
    ]
    assert all(r.gateway == "gw-dead" and r.envelope is not None for r in owned)
    assert await requests.owned_by([]) == []
    assert await requests.owned_by(["nobody"]) == []


async def test_release_withdraws_a_queued_request_exactly_once(
    requests: RequestStore, events: EventStream, redis: Redis, keyspace: KeySpace
) -> None:
    await events.ensure_groups()
    await _submit(requests, "q1", "gw-dead")
    await _submit(requests, "q2", "gw-dead")

    assert await _release(requests, "q1") == "withdrawn"
    assert await _release(requests, "q1") is None

    record = await requests.get("q1")
    assert record is not None
    assert (record.status, record.reason, record.finished_at) == (
        "withdrawn",
        REASON,
        NOW + 10,
    )
    assert await requests.queued_ids() == ["q2"]
    assert await requests.tenant_depths() == {"a": 1}
    assert 0 < await redis.ttl(keyspace.request("q1")) <= requests.retention_s
    assert await _completions(events) == [_event("q1", "withdrawn")]
    assert not await requests.grant("q1", worker_id="w", worker_url="u", now=NOW + 11)
    # a replica that was only stalled learns its request is withdrawn (no second event)
    assert await requests.withdraw("q1", now=NOW + 11, reason="queue_timeout")
    assert await _completions(events) == []


async def test_release_aborts_a_granted_request_and_frees_its_slot(
    requests: RequestStore, events: EventStream
) -> None:
    await events.ensure_groups()
    await _submit(requests, "g1", "gw-dead")
    assert await requests.grant("g1", worker_id="w", worker_url="u", now=NOW)

    assert await _release(requests, "g1") == "aborted"
    assert await _release(requests, "g1") is None

    record = await requests.get("g1")
    assert record is not None and record.status == "aborted"
    assert await requests.inflight() == {}
    assert await _completions(events) == [_event("g1", "aborted")]
    # the gateway's own late finish cannot turn it into a second outcome
    assert not await requests.finish("g1", now=NOW + 11, status="ok")
    assert not await requests.requeue("g1", now=NOW + 11)


async def test_release_never_touches_what_can_still_be_served_or_has_ended(
    requests: RequestStore, events: EventStream, stores: StateStores
) -> None:
    await events.ensure_groups()
    for rid in ("alive", "other", "ok", "left"):
        await _submit(requests, rid, "gw-ok" if rid == "other" else "gw-dead")
    assert await requests.grant("ok", worker_id="w", worker_url="u", now=NOW)
    assert await requests.finish("ok", now=NOW, status="ok")
    assert await requests.withdraw("left", now=NOW, reason="client_disconnected")

    assert await _release(requests, "other") is None  # not that replica's request
    assert await _release(requests, "ok") is None  # served
    assert await _release(requests, "left") is None  # already withdrawn
    assert await _release(requests, "unknown") is None
    await stores.gateways.beat("gw-dead", ttl_s=5, now=NOW)
    assert await _release(requests, "alive") is None  # its replica beats again

    assert await requests.queued_ids() == ["alive", "other"]
    assert await _completions(events) == []


async def test_the_registry_score_never_goes_down_and_a_revival_raises_it(
    stores: StateStores,
) -> None:
    """Whatever the replica's clock does, a beat after the sweep read it lost moves its score,
    so that sweep's `forget` is refused even once the replica's liveness expired again."""
    gateways = stores.gateways
    await gateways.beat("gw", ttl_s=5, now=NOW)
    await gateways.beat("gw", ttl_s=5, now=NOW - 3)  # alive, its clock stepped back: kept
    assert await gateways.registered() == {"gw": NOW}
    await gateways.leave("gw")
    seen = (await gateways.lost_scores())["gw"]

    await gateways.beat("gw", ttl_s=5, now=NOW)  # back, its clock no later than before
    await gateways.leave("gw")

    assert (await gateways.registered())["gw"] > seen
    assert not await gateways.forget("gw", score=seen)
