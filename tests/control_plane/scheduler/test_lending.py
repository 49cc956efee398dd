"""The leader's lending desk with a real Redis, the real core and the real scripts.

The property: under any interleaving of gateway submits (fast lane on), leader cycles
(arrivals, decisions, grants, lending) and request ends — including ends the leader hears of
before the take itself — the requests granted on a worker plus the slots still lent on it
never exceed its capacity, the leader never counts fewer than that, and once the traffic
stops every lent slot comes back (nothing leaks).
"""

from __future__ import annotations

import random
from collections import Counter

import pytest

from control_plane.admission.registry import build_admission
from control_plane.contracts.events import Complete
from control_plane.contracts.knobs import PluginChoice
from control_plane.contracts.requests import Envelope
from control_plane.contracts.workers import WorkerEntry, WorkerSample
from control_plane.core.job import Job
from control_plane.core.scheduler_core import SchedulerCore
from control_plane.placement.registry import build_placement
from control_plane.scheduler.entries import apply_event
from control_plane.scheduler.intake import take_in
from control_plane.scheduler.lending import LendingDesk, lendable
from control_plane.scheduler.rebuild import rebuild
from control_plane.scheduler.workers import observe
from control_plane.state import StateStores
from control_plane.state.inflight_view import NO_ENTRY
from control_plane.state.request_results import GrantOrder

NOW = 1_000.0
CAP = 4
WORKERS = [WorkerEntry(id=f"w{i}", url=f"http://w{i}", model="m", max_num_seqs=CAP) for i in (1, 2)]


class Harness:
    """One leader (core + desk) and the gateways' side, on one Redis."""

    def __init__(self, stores: StateStores, core: SchedulerCore, desk: LendingDesk) -> None:
        self.stores, self.core, self.desk = stores, core, desk
        self.n = 0
        self.cursor = NO_ENTRY

    @classmethod
    async def start(cls, stores: StateStores, per_worker: int = 3) -> Harness:
        for w in WORKERS:
            await stores.workers.upsert(w)
        await stores.arrivals.ensure_group()
        assert await stores.lease.acquire("s1", 60.0, NOW, fresh=True)
        token = stores.lease.token
        assert token is not None
        desk = LendingDesk(stores.lending, token, enabled=True, per_worker=per_worker)
        await desk.take_over()
        core = (await rebuild(stores, "vtc", NOW)).core
        for w in WORKERS:
            observe(core, w.id, WorkerSample(True, NOW, models={"m": 4096}))
        return cls(stores, core, desk)

    async def submit(self, tenant: str = "a") -> bool:
        self.n += 1
        job = Job(id=f"r{self.n}", tenant=tenant, arrival=NOW, n_in=10, max_tokens=8, model="m")
        result = await self.stores.requests.submit(
            Envelope(job, {}, "gw"),
            request_id=job.id,
            tenant=tenant,
            gateway_id="gw",
            queue_cap=10_000,
            now=NOW,
            fast=True,
        )
        return result.grant is not None

    async def read_arrivals(self) -> None:
        read = await self.stores.arrivals.read_after(self.cursor, count=1000, block_ms=None)
        arrivals, self.cursor = read.arrivals, read.last_id
        await take_in(self.core, self.stores, self.desk, arrivals, NOW)

    async def cycle(self) -> None:
        """What the dispatch loop does: decide, grant, then lend or reclaim."""
        decisions = self.core.decide(NOW)
        orders = [GrantOrder(d.job.id, d.worker.id, d.worker.url) for d in decisions]
        token = self.desk._token
        granted = await self.stores.requests.grant_many(orders, now=NOW, fencing_token=token)
        for decision, ok in zip(decisions, granted, strict=True):
            if not ok:
                self.core.undo(decision)
        await self.desk.step(self.core, NOW)

    async def end_one(self, rng: random.Random) -> None:
        """A gateway finishes a request it holds (granted in Redis) and reports it."""
        inflight = await self.stores.requests.inflight()
        if not inflight:
            return
        rid = rng.choice(sorted(inflight))
        await self.stores.requests.finish(rid, now=NOW, status="ok")
        event = Complete(rid, "ok", finished=NOW, n_in=10, n_out=8)
        self.desk.note_end(self.core, event, apply_event(self.core, event, NOW))

    async def check(self) -> None:
        real = Counter((await self.stores.requests.inflight()).values())
        lent = (await self.stores.lending.lent()).get("m", {})
        for w in WORKERS:
            slot = self.core.workers[w.id]
            leader_count = len(slot.inflight) + slot.lent
            assert real[w.id] + lent.get(w.id, 0) <= CAP, (w.id, real, lent)
            assert leader_count <= CAP
            assert leader_count >= real[w.id] + lent.get(w.id, 0), (w.id, slot.lent, real, lent)


@pytest.mark.parametrize("seed", range(6))
async def test_random_traffic_never_overcommits_and_nothing_leaks(
    redis_url: str, seed: int
) -> None:
    stores = StateStores.open(redis_url, f"lend{seed}")
    h = await Harness.start(stores)
    rng = random.Random(seed)
    fast = 0
    for _ in range(400):
        op = rng.choice(["submit", "submit", "read", "cycle", "cycle", "end", "end", "end"])
        if op == "submit":
            fast += await h.submit(rng.choice("ab"))
        elif op == "read":
            await h.read_arrivals()
        elif op == "cycle":
            await h.cycle()
        else:
            await h.end_one(rng)
        await h.check()
    assert fast > 0, "the fast lane was never used"
    for _ in range(200):  # drain: no new traffic
        await h.read_arrivals()
        await h.cycle()
        await h.end_one(rng)
        await h.check()
    await h.read_arrivals()
    await h.desk.step(h.core, NOW)
    assert await stores.requests.inflight() == {} and h.core.running == {}
    assert h.core.pending == {}
    lent = (await stores.lending.lent()).get("m", {})
    assert {w: s.lent for w, s in h.core.workers.items()} == {
        w.id: lent.get(w.id, 0) for w in WORKERS
    }
    await stores.aclose()


async def test_idle_slots_are_lent_counted_and_taken_back_when_a_request_waits(
    redis_url: str,
) -> None:
    stores = StateStores.open(redis_url, "lend-basic")
    h = await Harness.start(stores, per_worker=3)
    await h.cycle()
    assert await stores.lending.lent() == {"m": {"w1": 3, "w2": 3}}
    assert [s.view().inflight for s in h.core.workers.values()] == [3, 3]

    assert [await h.submit() for _ in range(8)] == [True] * 6 + [False] * 2
    await h.read_arrivals()
    assert len(h.core.running) == 6 and len(h.core.pending) == 2
    assert sum(s.lent for s in h.core.workers.values()) == 0
    await h.cycle()  # the leader decides: the two waiting ones go to the free slots
    assert len(h.core.running) == 8 and await stores.lending.lent() == {}
    await h.check()
    await stores.aclose()


async def test_the_takes_are_charged_like_the_leaders_own_dispatches(redis_url: str) -> None:
    stores = StateStores.open(redis_url, "lend-charge")
    h = await Harness.start(stores)
    await h.cycle()
    assert await h.submit("a")
    await h.read_arrivals()
    counter_fast = h.core.ctx.ledger.counter(("a",))
    service_fast = h.core.ctx.ledger.service(("a",))

    other = StateStores.open(redis_url, "lend-charge-b")
    g = await Harness.start(other)
    g.desk.enabled = False
    assert not await g.submit("a")
    await g.read_arrivals()
    await g.cycle()
    assert counter_fast == g.core.ctx.ledger.counter(("a",)) > 0
    assert service_fast == g.core.ctx.ledger.service(("a",)) > 0
    await stores.aclose()
    await other.aclose()


async def test_nothing_is_lent_where_admission_or_placement_decide_per_request(
    redis_url: str,
) -> None:
    stores = StateStores.open(redis_url, "lend-plugins")
    await stores.knobs.set("placement", PluginChoice("kv_aware"))
    h = await Harness.start(stores)
    assert lendable(h.core) is not None
    await h.cycle()
    assert await stores.lending.lent() == {}
    h.core.dispatcher.placement = build_placement("least_loaded")
    await h.cycle()
    assert await stores.lending.lent() == {"m": {"w1": 3, "w2": 3}}
    h.core.dispatcher.admission = build_admission("capacity", {"token_fence": 0.5})
    await h.cycle()  # a knob switched: what was lent comes back
    assert await stores.lending.lent() == {}
    assert sum(s.lent for s in h.core.workers.values()) == 0
    await stores.aclose()


async def test_a_predecessors_take_is_left_to_the_rebuild(redis_url: str) -> None:
    stores = StateStores.open(redis_url, "lend-takeover")
    old = await Harness.start(stores)
    await old.cycle()
    assert await old.submit()
    await stores.lease.release("s1")
    new = await Harness.start(stores)  # reclaims, then rebuilds from `inflight`
    assert await stores.lending.lent() == {}
    assert set(new.core.running) == {"r1"}
    await new.read_arrivals()  # the take, lent by the old token: not adopted twice
    assert set(new.core.running) == {"r1"}
    assert sum(s.lent for s in new.core.workers.values()) == 0
    await stores.aclose()


async def test_a_worker_is_topped_up_only_once_half_its_loan_is_taken(redis_url: str) -> None:
    """One lend call per per_worker/2 takes, not one per take: the leader's Redis round trips
    per fast-lane request fall while the lane stays open."""
    stores = StateStores.open(redis_url, "lend-topup")
    h = await Harness.start(stores, per_worker=3)
    await h.cycle()

    async def lent_now() -> dict[str, int]:
        return dict((await stores.lending.lent()).get("m", {}))

    assert await lent_now() == {"w1": 3, "w2": 3}
    assert await h.submit() and await h.submit()  # one from each worker (most slots left)
    await h.read_arrivals()
    await h.cycle()
    assert await lent_now() == {"w1": 2, "w2": 2}  # more than half left: not topped up
    assert await h.submit()
    await h.read_arrivals()
    await h.cycle()
    lent = await lent_now()
    assert sorted(lent.values()) == [2, 2], lent  # the worker down to 1 got its room back
    await h.check()
    await stores.aclose()


async def test_a_step_says_when_slots_came_back(redis_url: str) -> None:
    """The dispatch loop decides again at once after a step that took slots back: a request
    queued while they were lent need not wait for the next cycle the clock brings."""
    stores = StateStores.open(redis_url, "lend-returned")
    h = await Harness.start(stores, per_worker=3)
    assert await h.desk.step(h.core, NOW) is False  # lent, nothing came back
    assert await stores.lending.lent() == {"m": {"w1": 3, "w2": 3}}
    h.desk.enabled = False
    assert await h.desk.step(h.core, NOW) is True  # all six taken back
    assert sum(s.lent for s in h.core.workers.values()) == 0
    assert await h.desk.step(h.core, NOW) is False  # nothing left to take back
    await stores.aclose()
