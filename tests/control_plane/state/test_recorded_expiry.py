"""Request hashes expire soon after their row is recorded (not an hour later), never while the
request is live; and a corrupt hash is read without raising."""

from __future__ import annotations

from redis.asyncio import Redis

from control_plane.state import KeySpace, RequestStore
from tests.support.envelopes import envelope

NOW = 1_700_000_000.0


async def submit(requests: RequestStore, rid: str) -> None:
    result = await requests.submit(
        envelope(rid), request_id=rid, tenant="a", gateway_id="gw", queue_cap=99, now=NOW
    )
    assert result.accepted


async def test_recorded_after_finish_expires_within_the_short_retention(
    requests: RequestStore, redis: Redis, keyspace: KeySpace
) -> None:
    await submit(requests, "r1")
    assert await requests.grant("r1", worker_id="w", worker_url="u", now=NOW)
    assert await requests.finish("r1", now=NOW + 1, status="ok")
    assert await redis.ttl(keyspace.request("r1")) > 3000  # unrecorded: the safety net

    assert await requests.mark_recorded(["r1", "unknown"]) == 1
    assert 0 < await redis.ttl(keyspace.request("r1")) <= requests.recorded_retention_s
    assert await requests.mark_recorded(["r1"]) == 1  # idempotent, never lengthens it
    assert await redis.ttl(keyspace.request("r1")) <= requests.recorded_retention_s


async def test_recorded_before_finish_still_gets_the_short_retention(
    requests: RequestStore, redis: Redis, keyspace: KeySpace
) -> None:
    """The gateway emits the `complete` event and calls `finish` concurrently: the recorder
    may commit the row first. The live hash must not expire then, but finish must not give it
    the hour either."""
    for rid in ("g", "q"):
        await submit(requests, rid)
    assert await requests.grant("g", worker_id="w", worker_url="u", now=NOW)

    assert await requests.mark_recorded(["g", "q"]) == 0
    for rid in ("g", "q"):
        assert await redis.ttl(keyspace.request(rid)) == -1  # live: no expiry
    assert await requests.finish("g", now=NOW + 1, status="ok")
    assert await requests.withdraw("q", now=NOW + 1, reason="client_disconnected")
    for rid in ("g", "q"):
        assert 0 < await redis.ttl(keyspace.request(rid)) <= requests.recorded_retention_s


async def test_a_corrupt_hash_is_read_with_its_errors_named(
    requests: RequestStore, redis: Redis, keyspace: KeySpace
) -> None:
    await submit(requests, "ok")
    await redis.hset(
        keyspace.request("bad"),
        mapping={"id": "bad", "status": "queued", "envelope": "{", "seq": "x", "granted_at": "?"},
    )
    await redis.zadd(keyspace.queued, {"bad": 0})
    records = {r.id: r for r in await requests.load_queued()}
    assert set(records) == {"ok", "bad"}
    bad = records["bad"]
    assert bad.envelope is None and bad.seq == 0 and bad.granted_at is None
    assert [e.split(":")[0] for e in bad.decode_errors] == ["envelope", "seq", "granted_at"]
    assert records["ok"].decode_errors == ()
