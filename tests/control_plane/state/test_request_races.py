"""Races and long random histories: RequestStore's counts and sets never drift apart."""

from __future__ import annotations

import asyncio
import random
from collections import Counter

import pytest
from redis.asyncio import Redis

from control_plane.state import EventStream, GrantStream, KeySpace, RequestStore, StateStores
from tests.support.envelopes import envelope

NOW = 1_700_000_000.0


async def test_concurrent_grant_and_withdraw_have_exactly_one_winner(
    stores: StateStores, requests: RequestStore, grants: GrantStream, events: EventStream
) -> None:
    await stores.preload_scripts()
    ids = [f"r{i}" for i in range(200)]
    for i, rid in enumerate(ids):
        await requests.submit(
            envelope(rid),
            request_id=rid,
            tenant=f"t{i % 3}",
            gateway_id="gw",
            queue_cap=1000,
            now=NOW,
        )
    rng = random.Random(7)

    async def race(rid: str) -> tuple[bool, bool]:
        grant = requests.grant(rid, worker_id="w", worker_url="u", now=NOW)
        withdraw = requests.withdraw(rid, now=NOW, reason="client_disconnected")
        if rng.random() < 0.5:
            granted, withdrawn = await asyncio.gather(grant, withdraw)
        else:
            withdrawn, granted = await asyncio.gather(withdraw, grant)
        return granted, withdrawn

    outcomes = dict(zip(ids, await asyncio.gather(*(race(r) for r in ids)), strict=True))

    assert all(granted != withdrawn for granted, withdrawn in outcomes.values())
    granted_ids = {rid for rid, (granted, _) in outcomes.items() if granted}
    withdrawn_ids = set(ids) - granted_ids
    assert granted_ids and withdrawn_ids, "the race should go both ways in 200 tries"
    assert set(await requests.inflight()) == granted_ids
    grant_entries = await grants.read("gw", "0-0", block_ms=None, count=1000)
    assert sorted(g.request_id for _, g in grant_entries) == sorted(granted_ids)
    withdrawals = await events.read("recorder", "rec", count=1000, block_ms=None)
    assert {e.id for _, e in withdrawals} == withdrawn_ids
    assert await requests.queued_ids() == []
    assert await requests.tenant_depths() == {}


async def test_one_gateway_cannot_exceed_the_cap_under_concurrent_submits(
    requests: RequestStore,
) -> None:
    results = await asyncio.gather(
        *(
            requests.submit(
                envelope(f"r{i}"),
                request_id=f"r{i}",
                tenant="a",
                gateway_id="gw",
                queue_cap=25,
                now=NOW,
            )
            for i in range(100)
        )
    )

    assert sum(r.accepted for r in results) == 25
    assert sorted(r.seq for r in results if r.accepted) == list(range(1, 26))
    assert await requests.tenant_depths() == {"a": 25}


async def assert_consistent(
    requests: RequestStore, redis: Redis, keyspace: KeySpace, model: dict[str, tuple[str, str]]
) -> None:
    """The queue, depths and in-flight set agree with each request's status and the model."""
    queued = [rid for rid, (status, _) in model.items() if status == "queued"]
    seqs = {rid: getattr(await requests.get(rid), "seq", 0) for rid in queued}
    assert await requests.queued_ids() == sorted(queued, key=seqs.__getitem__)
    assert await requests.tenant_depths() == dict(
        Counter(tenant for status, tenant in model.values() if status == "queued")
    )
    granted = {rid for rid, (status, _) in model.items() if status == "granted"}
    assert set(await requests.inflight()) == granted
    for rid, (status, _) in model.items():
        record = await requests.get(rid)
        assert record is not None and record.status == status, rid
    assert await redis.zcard(keyspace.queued) == len(queued)
    by_model = {m: int(n) for m, n in (await redis.hgetall(keyspace.model_queued)).items()}
    assert by_model == ({envelope("x").job.model: len(queued)} if queued else {})


@pytest.mark.parametrize("seed", range(4))
async def test_random_histories_keep_every_count_consistent(
    requests: RequestStore, redis: Redis, keyspace: KeySpace, seed: int
) -> None:
    rng = random.Random(seed)
    model: dict[str, tuple[str, str]] = {}
    attempts: dict[str, int] = {}
    cap = 6
    for step in range(300):
        op = rng.choice(["submit", "submit", "grant", "withdraw", "requeue", "finish"])
        rid = f"r{rng.randrange(40)}"
        status, tenant = model.get(rid, ("absent", rng.choice("abc")))
        now = NOW + step
        if op == "submit":
            depth = sum(1 for s, t in model.values() if s == "queued" and t == tenant)
            result = await requests.submit(
                envelope(rid),
                request_id=rid,
                tenant=tenant,
                gateway_id="gw",
                queue_cap=cap,
                now=now,
            )
            assert result.duplicate == (status != "absent")
            assert result.accepted == (status != "absent" or depth < cap)
            if status == "absent" and result.accepted:
                model[rid], attempts[rid] = ("queued", tenant), 1
        elif op == "grant":
            ok = await requests.grant(rid, worker_id="w", worker_url="u", now=now)
            assert ok == (status in ("queued", "granted"))
            if ok:
                model[rid] = ("granted", tenant)
        elif op == "withdraw":
            ok = await requests.withdraw(rid, now=now, reason="test")
            assert ok == (status in ("queued", "withdrawn"))
            if ok:
                model[rid] = ("withdrawn", tenant)
        elif op == "requeue":
            ok = await requests.requeue(rid, now=now)
            assert ok == (status == "granted" and attempts[rid] < 2)
            if ok:
                model[rid], attempts[rid] = ("queued", tenant), attempts[rid] + 1
        else:
            ok = await requests.finish(rid, now=now, status="ok")
            assert ok == (status in ("queued", "granted", "ok"))
            if ok:
                model[rid] = ("ok", tenant)
        if step % 25 == 0:
            await assert_consistent(requests, redis, keyspace, model)
    await assert_consistent(requests, redis, keyspace, model)
