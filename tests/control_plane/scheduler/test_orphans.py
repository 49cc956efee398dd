"""The events a new leader claims from its predecessor: a completion its restored checkpoint
already charged only frees the slot; one after the checkpoint is charged. Against a real
redis-server, with a real leading `SchedulerService` as the successor."""

from __future__ import annotations

import asyncio
import time

import pytest

from control_plane.contracts.events import Complete, Event, Progress
from control_plane.contracts.requests import Envelope
from control_plane.contracts.workers import WorkerEntry
from control_plane.core.job import Job
from control_plane.scheduler.leader import LeaderTerm
from control_plane.scheduler.lending import LendingDesk
from control_plane.scheduler.orphans import disown_charged
from control_plane.scheduler.rebuild import rebuild
from control_plane.scheduler.service import GROUP, SchedulerService
from control_plane.settings import Settings
from control_plane.state import StateStores
from control_plane.state.inflight_view import NO_ENTRY
from control_plane.state.tasks import stop_tasks
from tests.support.waiting import until

WORKER = WorkerEntry(id="w1", url="http://w1", model="m", max_num_seqs=4)
N_OUT = 7


def _job(rid: str) -> Job:
    return Job(id=rid, tenant="a", arrival=time.time(), n_in=50, max_tokens=40, model="m")


async def _granted(stores: StateStores, rid: str) -> None:
    await stores.requests.submit(
        Envelope(_job(rid), {}, "gw"),
        request_id=rid,
        tenant="a",
        gateway_id="gw",
        queue_cap=100,
        now=time.time(),
    )
    assert await stores.requests.grant(rid, worker_id="w1", worker_url="u", now=time.time())


async def test_only_completions_at_or_before_the_checkpoint_are_disowned(redis_url: str) -> None:
    stores = StateStores.open(redis_url, "orphans-unit")
    try:
        await stores.workers.upsert(WORKER)
        for rid in ("early", "late"):
            await _granted(stores, rid)
        core = (await rebuild(stores, "fcfs", time.time())).core
    finally:
        await stores.aclose()
    core.arrive(_job("queued"), None, time.time())
    entries: list[tuple[str, Event]] = [
        ("5-0", Progress("early", 3, 1.0)),
        ("5-1", Complete("early", "ok", finished=1.0, n_in=50, n_out=N_OUT)),
        ("5-2", Complete("queued", "error", finished=1.0, n_in=50, n_out=0)),
        ("5-3", Complete("unknown", "ok", finished=1.0, n_in=50, n_out=N_OUT)),
        ("6-0", Complete("late", "ok", finished=1.0, n_in=50, n_out=N_OUT)),
    ]
    rest = disown_charged(core, entries, "5-3")
    # a queued request's end still withdraws it; an unknown id's changes nothing either way
    assert [eid for eid, _ in rest] == ["5-0", "5-2", "5-3", "6-0"]
    assert set(core.running) == {"late"} and set(core.workers["w1"].inflight) == {"late"}
    assert core.ctx.ledger.stats(("a",)) is None  # nothing charged: the checkpoint has it


@pytest.mark.parametrize("checkpoint_after_apply", [True, False])
async def test_a_takeover_charges_a_claimed_completion_once(
    redis_url: str, checkpoint_after_apply: bool
) -> None:
    """The predecessor leads with `r` running; `r`'s completion is published and its mark
    has not landed yet (without the pipelined connection the mark follows the event). The
    predecessor applies it, checkpoints (after the apply, or before it), and dies before it
    acknowledges. Its successor rebuilds — `r` is still in `inflight` — and claims the event:
    `r`'s output must be in the ledger once and its slot free, either way."""
    cluster = f"orphans-{checkpoint_after_apply}"
    settings = Settings(redis_url=redis_url, cluster=cluster, lease_ttl_s=2.0)
    old = StateStores.open(redis_url, cluster)
    await old.events.ensure_groups()
    await old.arrivals.ensure_group()
    await old.workers.upsert(WORKER)
    await _granted(old, "r")
    read = await old.arrivals.read_after(NO_ENTRY, count=10, block_ms=None)
    await old.arrivals.mark(read.last_id, None)  # the predecessor applied them
    assert await old.lease.acquire("old", 30.0, time.time(), fresh=True)
    assert old.lease.token is not None
    pred = SchedulerService(settings, old, "old")
    pred.term = LeaderTerm(old.lease.token, 30.0, time.monotonic(), time.monotonic)
    pred.core = (await rebuild(old, "fcfs", time.time())).core
    pred.desk = LendingDesk(old.lending, old.lease.token, enabled=False, per_worker=1)
    await old.events.publish([Complete("r", "ok", finished=time.time(), n_in=50, n_out=N_OUT)])
    read = await old.events.read(GROUP, "old", count=10, block_ms=None)  # never acknowledged
    if not checkpoint_after_apply:
        await pred.checkpoint()
    await pred._apply_events(read)
    if checkpoint_after_apply:
        await pred.checkpoint()
    assert pred._core.running == {}
    assert await old.lease.release("old")
    await old.aclose()

    stores = StateStores.open(redis_url, cluster)
    service = SchedulerService(settings, stores, "new")
    runner = asyncio.create_task(service.run())
    try:
        await until(lambda: service.leading, 5.0)
        core = service._core
        stats = core.ctx.ledger.stats(("a",))
        assert stats is not None and stats.tokens_out == N_OUT and stats.completed == 1
        assert core.running == {} and not core.workers["w1"].inflight
        assert await stores.requests.inflight() == {"r": "w1"}  # the mark is still to come
        # every claimed entry is acknowledged, the disowned one too (or the stream's trimming
        # would stop at it, and every later takeover would claim it again)
        pending = await stores.redis.xpending(stores.keyspace.events, GROUP)
        assert pending["pending"] == 0
        # and the predecessor's consumer is forgotten (each leader reads under a name of its
        # own: every takeover left one in the group for good)
        consumers = await stores.redis.xinfo_consumers(stores.keyspace.events, GROUP)
        assert [c["name"] for c in consumers] == ["new"]
    finally:
        await stop_tasks([runner])
        await service.http.aclose()
        await stores.aclose()
