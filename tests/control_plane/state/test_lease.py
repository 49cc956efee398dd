"""Contract of LeaderLease: exclusivity, expiry, takeover within 2×TTL, fencing."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from redis.asyncio import Redis

from control_plane.state import Checkpoint, KeySpace, LeaderLease

TTL = 0.3


async def test_only_one_holder_and_renew_only_by_it(redis: Redis, keyspace: KeySpace) -> None:
    a, b = LeaderLease(redis, keyspace), LeaderLease(redis, keyspace)

    assert await a.acquire("A", TTL, now=1.0)
    assert not await b.acquire("B", TTL, now=1.0)

    assert (a.token, b.token) == (1, None)
    assert await a.holder() == "A"
    assert await a.renew("A", TTL)
    assert not await b.renew("B", TTL)
    assert await a.acquire("A", TTL, now=1.1), "re-acquiring your own lease renews it"
    assert a.token == 1 and await a.current_token() == 1
    assert (await a.info())["acquired_at"] == 1.0


async def test_lease_expires_and_a_standby_takes_over_with_a_new_token(
    redis: Redis, keyspace: KeySpace
) -> None:
    leader, standby = LeaderLease(redis, keyspace), LeaderLease(redis, keyspace)
    assert await leader.acquire("A", TTL, now=1.0)
    last_renewal = time.monotonic()

    for _ in range(100):  # the standby polls at TTL/10, as a scheduler standby would
        if await standby.acquire("B", TTL, now=2.0):
            break
        await asyncio.sleep(TTL / 10)
    waited = time.monotonic() - last_renewal

    assert TTL * 0.8 <= waited <= 2 * TTL
    assert standby.token == 2
    assert await standby.holder() == "B"
    assert not await leader.renew("A", TTL)
    assert leader.token is None
    assert not await leader.is_current(1)
    assert await standby.is_current(2)
    info = await standby.info()
    assert (info["holder"], info["token"], info["acquired_at"]) == ("B", 2, 2.0)


async def test_release_frees_the_lease_at_once_only_for_its_holder(
    redis: Redis, keyspace: KeySpace
) -> None:
    a, b = LeaderLease(redis, keyspace), LeaderLease(redis, keyspace)
    assert await a.acquire("A", 30, now=1.0)

    assert not await b.release("B")
    assert await a.holder() == "A"
    assert await a.release("A")

    assert await a.holder() is None
    assert await b.acquire("B", 30, now=2.0)
    assert b.token == 2


async def test_checkpoint_writes_of_a_deposed_leader_are_refused(
    redis: Redis, keyspace: KeySpace
) -> None:
    old, new = LeaderLease(redis, keyspace), LeaderLease(redis, keyspace)
    checkpoints = Checkpoint(redis, keyspace)
    assert await old.acquire("A", TTL, now=1.0)
    old_token = old.token
    assert old_token is not None
    assert await checkpoints.save("policy", {"by": "A"}, fencing_token=old_token)
    await asyncio.sleep(TTL * 1.2)
    assert await new.acquire("B", TTL, now=2.0)
    assert new.token is not None

    assert not await checkpoints.save("policy", {"by": "A-late"}, fencing_token=old_token)
    assert await checkpoints.load("policy") == {"by": "A"}
    assert await checkpoints.save("policy", {"by": "B"}, fencing_token=new.token)
    assert await checkpoints.load("policy") == {"by": "B"}


async def test_lease_calls_run_late_leave_the_later_tenure_alone(
    redis: Redis, keyspace: KeySpace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call that timed out in a Redis stall still runs when Redis resumes, maybe after its
    caller took the lease anew. Regression: such a late fresh acquire re-took the lease (the
    live tenure's token went stale and the leader stepped down) and a late release freed it."""
    lease = LeaderLease(redis, keyspace)
    sent: list[tuple[str, list[str], list[Any]]] = []
    call = lease._scripts.call

    async def recording(name: str, keys: Any, args: Any) -> Any:
        sent.append((name, list(keys), list(args)))
        return await call(name, keys, args)

    monkeypatch.setattr(lease._scripts, "call", recording)
    assert await lease.acquire("A", 30, now=1.0, fresh=True)
    old = lease.token
    assert old is not None
    assert await lease.renew("A", 30, token=old)
    assert await lease.release("A", token=old)
    late = list(sent)  # what a stalled Redis would run on resuming
    assert await lease.acquire("A", TTL * 10, now=2.0, fresh=True)
    live = lease.token
    assert live is not None and live > old

    for name, keys, args in late:
        assert await call(name, keys, args) == 0, name
    assert await lease.holder() == "A"
    assert await lease.current_token() == live
    assert await redis.pttl(keyspace.leader) <= TTL * 10 * 1000  # the late renewal did not run
    assert await lease.renew("A", TTL, token=live)
    assert not await lease.release("A", token=old)
    assert await lease.release("A", token=live)
    assert await lease.holder() is None
