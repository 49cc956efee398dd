"""Contract of WorkerRegistry, Checkpoint, Knobs (with pub/sub) and RateLimiter."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from control_plane.contracts.checkpoints import (
    LeaderState,
    LiveView,
    NodeCount,
    PolicyState,
    WorkerLive,
)
from control_plane.contracts.knobs import Fairness, KnobChange, Other, PluginChoice
from control_plane.contracts.workers import WorkerEntry, WorkerSample
from control_plane.state import (
    Checkpoint,
    KnobChanged,
    Knobs,
    RateLimiter,
    StateStores,
    StateUnavailable,
    WorkerRegistry,
)
from control_plane.state import worker_registry as registry_module
from control_plane.state.codec import dumps
from control_plane.state.keys import KeySpace
from control_plane.state.scripts import Scripts


async def test_worker_registry_upserts_merges_and_removes(stores: StateStores) -> None:
    workers: WorkerRegistry = stores.workers
    await workers.upsert(WorkerEntry(id="w2", url="http://w2", max_num_seqs=64, kv_tokens=4096))
    await workers.upsert(WorkerEntry(id="w1", url="http://w1", kind="sim", status="draining"))

    await workers.upsert(WorkerEntry(id="w2", max_num_seqs=32))

    assert await workers.list() == [
        WorkerEntry(id="w1", url="http://w1", kind="sim", status="draining"),
        WorkerEntry(id="w2", url="http://w2", max_num_seqs=32, kv_tokens=4096, status="active"),
    ]
    assert await workers.set_status("w2", "unhealthy")
    assert getattr(await workers.get("w2"), "status", None) == "unhealthy"
    assert not await workers.set_status("ghost", "active")
    assert await workers.get("ghost") is None
    with pytest.raises(ValueError, match="status"):
        await workers.set_status("w1", "sleeping")
    with pytest.raises(ValueError, match="id"):
        await workers.upsert(WorkerEntry("", url="http://x"))
    with pytest.raises(ValueError, match="status"):
        await workers.upsert(WorkerEntry("w3", status="asleep"))
    assert await workers.remove("w1")
    assert not await workers.remove("w1")
    assert [w.id for w in await workers.list()] == ["w2"]


async def test_create_and_update_change_only_what_they_were_decided_on(
    stores: StateStores,
) -> None:
    """`create` never overwrites an entry; `update` never re-creates a removed one nor
    changes one whose origin is not the expected one (None: no origin field)."""
    workers: WorkerRegistry = stores.workers
    assert await workers.create(WorkerEntry("c1", "http://c1", origin="config"))
    assert not await workers.create(WorkerEntry("c1", "http://other", origin="admin"))
    assert (await workers.get("c1")) == WorkerEntry(
        "c1", "http://c1", status="active", origin="config"
    )

    drain = WorkerEntry("c1", status="draining", origin="config-removed")
    assert not await workers.update(drain, origin="admin")
    assert not await workers.update(drain, origin=None)
    assert (await workers.get("c1")).status == "active"  # type: ignore[union-attr]
    assert await workers.update(drain, origin="config")
    got = await workers.get("c1")
    assert got is not None and (got.url, got.status, got.origin) == (
        "http://c1",
        "draining",
        "config-removed",
    )

    await workers.remove("c1")
    assert not await workers.update(drain, origin="config-removed")
    assert await workers.get("c1") is None  # not re-created without its URL
    await workers.upsert(WorkerEntry("own", "http://own"))  # no origin: a worker's own
    assert await workers.update(WorkerEntry("own", origin="config"), origin=None)
    assert (await workers.get("own")).origin == "config"  # type: ignore[union-attr]


async def test_worker_metrics_are_stamped_and_removed_with_the_worker(
    stores: StateStores,
) -> None:
    workers = stores.workers
    await workers.upsert(WorkerEntry(id="w1"))
    sample = WorkerSample(True, 12.0, running=3, waiting=1, kv_usage=0.25, models={"m": 2048})
    await workers.set_metrics("w1", sample, now=12.5)

    assert await workers.metrics() == {"w1": (sample, 12.5)}
    await workers.remove("w1")
    assert await workers.metrics() == {}


async def test_a_bounded_worker_change_run_late_changes_nothing(
    stores: StateStores, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An admin's worker change that timed out still runs when Redis answers again, after its
    audit row was rolled back. Bounded, it must change nothing then: a registration, a drain
    or a removal, each run past its one-second ticket."""
    workers = stores.workers
    await workers.upsert(WorkerEntry(id="w1", url="http://w1"), bounded=True)
    assert await workers.set_status("w1", "draining", bounded=True)
    assert not await workers.remove("ghost", bounded=True)
    call = workers._scripts.call
    sent = stall_scripts(monkeypatch, workers._scripts)
    for change in (
        workers.upsert(WorkerEntry(id="w2", url="http://w2"), bounded=True),
        workers.set_status("w1", "active", bounded=True),
        workers.remove("w1", bounded=True),
    ):
        with pytest.raises(StateUnavailable):
            await change
    await asyncio.sleep(1.1)
    assert [await call(*late) for late in sent] == [-2, -2, -2]  # Redis runs them late
    assert await workers.list() == [WorkerEntry(id="w1", url="http://w1", status="draining")]

    async def slow(name: str, keys: Any, args: Any) -> Any:
        await asyncio.sleep(0.2)  # the ticket runs out on the way
        return await call(name, keys, args)

    monkeypatch.setattr(workers._scripts, "call", slow)
    monkeypatch.setattr(registry_module, "CHANGE_WITHIN_MS", 50)
    with pytest.raises(StateUnavailable, match="too late"):
        await workers.remove("w1", bounded=True)
    assert [w.id for w in await workers.list()] == ["w1"]


async def test_checkpoints_round_trip_and_replace(stores: StateStores) -> None:
    checkpoints: Checkpoint = stores.checkpoints
    assert await checkpoints.load("ledger") is None

    assert await checkpoints.save("ledger", {"a": {"service": 1.5}, "tags": ["x"]})
    assert await checkpoints.save("live", {"queue": 3})
    assert await checkpoints.save("ledger", {"a": {"service": 2.0}})

    assert await checkpoints.load("ledger") == {"a": {"service": 2.0}}
    assert await checkpoints.load("live") == {"queue": 3}


async def test_the_leaders_checkpoints_round_trip_typed(stores: StateStores) -> None:
    checkpoints = stores.checkpoints
    assert await checkpoints.load_leader() is None and await checkpoints.load_live() is None
    state = LeaderState({"window_s": 60.0, "nodes": []}, {"policy": {"name": "vtc"}}, {"r1": 7})
    view = LiveView(
        "s1",
        12.5,
        PolicyState("vtc", {"w": 1}, {"counters": [1.0]}),
        tenants={"acme": {"queued": 2, "inflight": 1}},
        nodes=(NodeCount(("acme",), 2, 1), NodeCount(("acme", "chat"), 2, 1)),
        weights={"acme": 2.0},
        workers=(WorkerLive("w1", "http://w1", "m", True, kv_usage=0.5, scraped_at=12.0),),
    )
    assert await checkpoints.save_leader(state) and await checkpoints.save_live(view)
    assert await checkpoints.load_leader() == state
    assert await checkpoints.load_live() == view
    await checkpoints.save("live", {"workers": [{"url": "no id"}]})  # an odd document
    assert await checkpoints.load_live() is None  # not decodable: as if none (logged)


async def test_knob_changes_are_stored_versioned_and_announced(stores: StateStores) -> None:
    knobs: Knobs = stores.knobs
    first = await knobs.subscribe()
    second = await knobs.subscribe()
    try:
        assert await knobs.set("policy", PluginChoice("vtc", {"a": 1})) == 1
        assert await knobs.set("queue_cap/acme", Other(12)) == 2
        assert await knobs.set("policy", PluginChoice("fcfs")) == 3

        for sub in (first, second):
            got = [await asyncio.wait_for(anext(sub), timeout=2) for _ in range(3)]
            assert got == [
                KnobChange("policy", PluginChoice("vtc", {"a": 1}), 1),
                KnobChange("queue_cap/acme", Other(12), 2),
                KnobChange("policy", PluginChoice("fcfs"), 3),
            ]
    finally:
        await first.aclose()
        await second.aclose()
    assert await knobs.get_all() == {"policy": PluginChoice("fcfs"), "queue_cap/acme": Other(12)}
    assert await knobs.get("policy") == PluginChoice("fcfs")
    assert await knobs.get("missing") is None
    assert await knobs.version() == 3


async def test_a_stored_knob_that_does_not_decode_is_kept_as_is(
    stores: StateStores, redis: Redis, keyspace: KeySpace
) -> None:
    """An older release (or a hand edit) wrote a policy knob of the wrong shape: readers get
    it as `Other` and skip it, as they skipped an invalid value before."""
    await redis.hset(keyspace.knobs, mapping={"policy": '"fcfs"', "weights": '{"a": "x"}'})
    assert await stores.knobs.get_all() == {"policy": Other("fcfs"), "weights": Other({"a": "x"})}


async def test_knob_subscription_works_as_a_context_manager(stores: StateStores) -> None:
    async with await stores.knobs.subscribe() as sub:
        await stores.knobs.set("revoked_keys", Other(["k1"]))
        async for change in sub:
            assert change == KnobChange("revoked_keys", Other(["k1"]), 1)
            break


async def test_token_bucket_allows_bursts_then_paces(stores: StateStores) -> None:
    limiter: RateLimiter = stores.rate_limiter
    t0 = 1_700_000_000.0

    assert [(await limiter.allow("a", 2.0, 3, t0))[0] for _ in range(3)] == [True] * 3
    allowed, retry_after = await limiter.allow("a", 2.0, 3, t0)
    assert not allowed and retry_after == pytest.approx(0.5)
    assert await limiter.allow("b", 2.0, 3, t0) == (True, 0.0)
    allowed, retry_after = await limiter.allow("a", 2.0, 3, t0 + 0.25)
    assert not allowed and retry_after == pytest.approx(0.25)
    assert await limiter.allow("a", 2.0, 3, t0 + 0.5) == (True, 0.0)
    # A clock stepping back does not refill the bucket.
    assert not (await limiter.allow("a", 2.0, 3, t0 - 100))[0]
    assert await limiter.allow("a", 2.0, 3, t0 + 10, cost=3) == (True, 0.0)
    with pytest.raises(ValueError):
        await limiter.allow("a", 0.0, 3, t0)
    with pytest.raises(ValueError):
        await limiter.allow("a", 1.0, 1, t0, cost=2)


async def test_a_knob_is_replaced_only_over_what_was_read_and_only_in_time(
    stores: StateStores, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An admin change that timed out still runs when Redis answers again. Regression: it then
    applied — with its audit row rolled back — even over a later change."""
    knobs = stores.knobs
    stored, text = await knobs.read("admission")
    assert (stored, text) == (None, "")
    first = PluginChoice("capacity", {"max_concurrency": 4})
    assert await knobs.replace("admission", first, expected=text) == await knobs.version()
    assert await knobs.read("admission") == (first, text_of(first))

    later = PluginChoice("capacity", {"max_concurrency": 8})
    with pytest.raises(KnobChanged):  # a change based on what was read before `first`
        await knobs.replace("admission", later, expected="")
    call = knobs._scripts.call
    sent = stall_scripts(monkeypatch, knobs._scripts)
    with pytest.raises(StateUnavailable):
        await knobs.replace("admission", later, expected=text_of(first), within_ms=50)
    monkeypatch.setattr(knobs._scripts, "call", call)
    await asyncio.sleep(0.1)
    assert await call(*sent[0]) == -2  # Redis runs it late: nothing changes
    assert await knobs.get("admission") == first


async def test_several_knobs_are_replaced_in_one_step_or_not_at_all(stores: StateStores) -> None:
    """`replace_many`: every knob over what was read, each announced with its own version in
    order; one stale read and none changes (no version, no announcement)."""
    knobs = stores.knobs
    policy = PluginChoice("exfairs", {"alpha": 0.5})
    await knobs.set("policy", policy)
    sub = await knobs.subscribe()
    try:
        fairness, carried = Fairness(0.9, 0.2), PluginChoice("exfairs", {"alpha": 0.9})
        with pytest.raises(KnobChanged, match="knobs 'fairness', 'policy' changed"):
            await knobs.replace_many([("fairness", fairness, ""), ("policy", carried, "")])
        assert await knobs.version() == 1 and await knobs.get("fairness") is None
        changes = [("fairness", fairness, ""), ("policy", carried, text_of(policy))]
        assert await knobs.replace_many(changes) == 3
        got = [await asyncio.wait_for(anext(sub), timeout=2) for _ in range(2)]
        assert got == [KnobChange("fairness", fairness, 2), KnobChange("policy", carried, 3)]
    finally:
        await sub.aclose()
    assert await knobs.get_all() == {"fairness": fairness, "policy": carried}


async def test_a_malformed_knob_set_changes_nothing(
    stores: StateStores, keyspace: KeySpace
) -> None:
    """Redis keeps the writes a failing script made before its error: a knob without its
    expected text, or one named twice, is refused before any write (a reviewer stored `a`
    and bumped the version with a call whose second knob lacked its value)."""
    knobs = stores.knobs
    ks = keyspace
    call = knobs._scripts.call
    keys = [ks.knobs, ks.knobs_version]
    for args in (
        ["a", "1", ks.knobs_channel, "", "b"],
        ["a", "1", ks.knobs_channel, "", "b", "2"],
        ["a", "1", ks.knobs_channel, "", "a", "2", ""],
        ["a", "1", ks.knobs_channel, "", "b", "2", "", "b", "3", ""],
    ):
        with pytest.raises(ResponseError, match="knob_set: "):
            await call("knob_set", keys, args)
    assert await knobs.get_all() == {} and await knobs.version() == 0
    with pytest.raises(ValueError, match="named twice"):
        await knobs.replace_many([("a", Other(1), ""), ("a", Other(2), "")])


def stall_scripts(monkeypatch: pytest.MonkeyPatch, scripts: Scripts) -> list[tuple[str, Any, Any]]:
    """Make `scripts` calls stall: each is kept (as if in Redis's socket buffer) and its caller
    times out; → the calls kept, to be run late."""
    sent: list[tuple[str, Any, Any]] = []

    async def stalled(name: str, keys: Any, args: Any) -> Any:
        sent.append((name, keys, args))
        raise StateUnavailable("Timeout reading from the socket")

    monkeypatch.setattr(scripts, "call", stalled)
    return sent


def text_of(value: PluginChoice) -> str:
    return dumps(value.to_json())


async def test_a_long_plugin_name_an_older_build_stored_still_decodes(
    stores: StateStores, redis: Redis, keyspace: KeySpace
) -> None:
    """The admin API's generic knob endpoint took plug-in names of any length before
    PLUGIN_NAME_MAX; a stored one is the plug-in the scheduler runs: refused on read (`Other`,
    skipped) the default took its place on upgrade, with only a log line. From a review."""
    long = "operator_plugins." + "a" * 200 + ":Gate"
    stored = dumps({"name": long, "params": {}})
    names = ("policy", "admission", "placement")
    await redis.hset(keyspace.knobs, mapping=dict.fromkeys(names, stored))
    assert await stores.knobs.get_all() == {
        "policy": PluginChoice(long),
        "admission": PluginChoice(long),
        "placement": PluginChoice(long),
    }
