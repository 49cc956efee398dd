"""The leader's intake of the arrivals stream, against a real redis-server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from redis.exceptions import TimeoutError as RedisTimeout

from control_plane.contracts.requests import Envelope, RequestRecord
from control_plane.contracts.workers import WorkerEntry, WorkerSample
from control_plane.core.job import Job, Outcome
from control_plane.scheduler.intake import ArrivalsIntake, take_in
from control_plane.scheduler.leader import LeaderTerm
from control_plane.scheduler.lending import LendingDesk
from control_plane.scheduler.rebuild import rebuild
from control_plane.scheduler.service import SchedulerService, _resilient
from control_plane.scheduler.workers import observe
from control_plane.settings import Settings
from control_plane.state import StateStores, StateUnavailable
from control_plane.state.arrivals import Arrival
from control_plane.state.inflight_view import NO_ENTRY
from control_plane.state.tasks import stop_tasks

WORKER = WorkerEntry(id="w1", url="http://w1", model="m", max_num_seqs=2)
NOW = 1_000.0


@pytest.fixture
async def stores(redis_url: str) -> AsyncIterator[StateStores]:
    s = StateStores.open(redis_url, "intake")
    await s.arrivals.ensure_group()
    await s.workers.upsert(WORKER)
    yield s
    await s.aclose()


async def _submit(stores: StateStores, rid: str, arrival: float) -> None:
    job = Job(id=rid, tenant="a", arrival=arrival, n_in=10, max_tokens=20, model="m")
    result = await stores.requests.submit(
        Envelope(job, {}, "gw"), request_id=rid, tenant="a", gateway_id="gw", queue_cap=9, now=NOW
    )
    assert result.accepted


async def read_all(stores: StateStores) -> list[Arrival]:
    return (await stores.arrivals.read_after(NO_ENTRY, count=10, block_ms=None)).arrivals


async def test_an_arrival_a_new_leader_already_granted_does_not_free_its_slot(
    stores: StateStores,
) -> None:
    """Requests queued while no leader ran: the rebuild finds them in Redis, the first cycle
    grants what fits, and only then are their arrivals read. They must stay running on their
    worker (the slot counted), not be queued again for a second grant — here by the check
    on the core's running requests alone (no rebuild tail given), the defence behind it."""
    for i, rid in enumerate(["r1", "r2", "r3"]):
        await _submit(stores, rid, NOW + i)
    core = (await rebuild(stores, "fcfs", NOW)).core
    observe(core, "w1", WorkerSample(True, NOW, models={"m": 4096}))
    granted = [d.job.id for d in core.decide(NOW)]
    assert granted == ["r1", "r2"]  # max_num_seqs = 2
    for rid in granted:
        assert await stores.requests.grant(rid, worker_id="w1", worker_url="u", now=NOW)
    desk = LendingDesk(stores.lending, 0, enabled=False, per_worker=1)

    arrivals = await read_all(stores)
    assert [a.id for a in arrivals] == ["r1", "r2", "r3"]
    await take_in(core, stores, desk, arrivals, NOW + 1)

    assert set(core.running) == {"r1", "r2"} and set(core.pending) == {"r3"}
    assert core.workers["w1"].inflight.keys() == {"r1", "r2"}
    assert core.decide(NOW + 1) == []  # the worker is full: nothing over-committed


async def test_a_grant_made_while_the_batch_reads_its_requeues_is_kept(
    stores: StateStores, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The batch also holds a re-queue, whose record is read from Redis: the dispatch loop
    runs during that read and grants the requests it holds; their arrivals, stale by then,
    must not queue them again (by their records and the running check; no tail given)."""
    await _submit(stores, "q", NOW)
    assert await stores.requests.grant("q", worker_id="w1", worker_url="u", now=NOW)
    assert await stores.requests.requeue("q", now=NOW + 1)  # its worker failed
    await _submit(stores, "r", NOW + 2)
    core = (await rebuild(stores, "fcfs", NOW + 3)).core
    observe(core, "w1", WorkerSample(True, NOW, models={"m": 4096}))
    assert set(core.pending) == {"q", "r"}
    arrivals = await read_all(stores)
    assert [(a.id, a.envelope is None) for a in arrivals] == [
        ("q", False),
        ("q", True),
        ("r", False),
    ]
    load_many = stores.requests.load_many

    async def dispatch_meanwhile(ids: list[str]) -> list[RequestRecord]:
        for d in core.decide(NOW + 3):
            assert await stores.requests.grant(d.job.id, worker_id="w1", worker_url="u", now=NOW)
        return await load_many(ids)

    monkeypatch.setattr(stores.requests, "load_many", dispatch_meanwhile)
    desk = LendingDesk(stores.lending, 0, enabled=False, per_worker=1)
    await take_in(core, stores, desk, arrivals, NOW + 4)

    assert set(core.running) == {"q", "r"} and core.pending == {}
    assert core.workers["w1"].inflight.keys() == {"q", "r"}


@pytest.mark.parametrize("locked", [True, False])
async def test_a_requeue_read_waits_for_the_grants_being_written(
    stores: StateStores, locked: bool
) -> None:
    """A new leader's rebuild found `q` re-queued; a cycle decided it and its grant is being
    written when the batch with `q`'s (stale) re-queue is taken in. Read before the grant
    lands, `q`'s record would say `queued` and take it out of `running` while its worker
    serves it; under the dispatch loop's lock the read waits and finds it granted. Without
    the lock (`locked` False) that is exactly what happens, which this test shows too."""
    await _submit(stores, "q", NOW)
    assert await stores.requests.grant("q", worker_id="w1", worker_url="u", now=NOW)
    assert await stores.requests.requeue("q", now=NOW + 1)
    core = (await rebuild(stores, "fcfs", NOW + 2)).core
    observe(core, "w1", WorkerSample(True, NOW, models={"m": 4096}))
    arrivals = await read_all(stores)
    desk = LendingDesk(stores.lending, 0, enabled=False, per_worker=1)
    deciding = asyncio.Lock()

    await deciding.acquire()  # the dispatch loop: decided, grant not written yet
    assert [d.job.id for d in core.decide(NOW + 2)] == ["q"]
    intake = asyncio.create_task(
        take_in(core, stores, desk, arrivals, NOW + 3, deciding if locked else None)
    )
    await asyncio.sleep(0.05)
    assert await stores.requests.grant("q", worker_id="w1", worker_url="u", now=NOW + 3)
    deciding.release()
    await intake

    if locked:
        assert set(core.running) == {"q"} and core.pending == {}
    else:
        assert core.running == {} and set(core.pending) == {"q"}  # the over-commit


@pytest.mark.parametrize("skips", [True, False])
async def test_arrivals_the_rebuild_already_holds_are_skipped(
    stores: StateStores, skips: bool
) -> None:
    """While no leader ran, r1..r3 were submitted and r3 withdrawn (its client left). The new
    leader's rebuild queues r1 and r2, grants both, and r1 completes — all before the batch
    with their first submissions is read. Those arrivals are stale: r1 must not be queued
    again (a second dispatch, charged again) and r3 never served. With `skips` False (no
    rebuild tail, as before the fix) that is exactly what happens, which this test shows too."""
    for i, rid in enumerate(["r1", "r2", "r3"]):
        await _submit(stores, rid, NOW + i)
    assert await stores.requests.withdraw("r3", now=NOW + 3, reason="client_disconnected")
    rebuilt = await rebuild(stores, "fcfs", NOW + 4)
    core = rebuilt.core
    observe(core, "w1", WorkerSample(True, NOW, models={"m": 4096}))
    assert [d.job.id for d in core.decide(NOW + 4)] == ["r1", "r2"]
    assert core.complete("r1", Outcome("ok", 10, 5), NOW + 5) is not None
    await _submit(stores, "r4", NOW + 6)  # after the rebuild: a new arrival, taken in
    desk = LendingDesk(stores.lending, 0, enabled=False, per_worker=1)

    arrivals = await read_all(stores)
    assert [a.id for a in arrivals] == ["r1", "r2", "r3", "r4"]
    tail = rebuilt.arrivals_tail if skips else NO_ENTRY
    taken = await take_in(core, stores, desk, arrivals, NOW + 6, rebuilt_to=tail)

    served = [d.job.id for d in core.decide(NOW + 6)]
    if skips:
        assert (taken.announced, served, core.pending) == (1, ["r4"], {})
    else:
        assert served == ["r1"] and set(core.pending) == {"r3", "r4"}  # the double dispatch


async def test_a_batch_whose_requeue_read_fails_is_applied_once_redis_answers(
    redis_url: str, stores: StateStores, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Arrivals are acknowledged as they are read. A batch holding a re-queue (q, whose
    worker failed) and a first submission (n) meets a Redis outage while the re-queue's record
    is read; the leader's arrivals loop restarts after it and must still apply that batch —
    dropped, n would stay unknown to the leader and q counted on its failed worker."""
    service = SchedulerService(Settings(redis_url=redis_url, cluster="intake"), stores, "s1")
    service.core = core = (await rebuild(stores, "fcfs", NOW)).core
    service.desk = LendingDesk(stores.lending, 0, enabled=False, per_worker=1)
    observe(core, "w1", WorkerSample(True, NOW, models={"m": 4096}))
    await _submit(stores, "q", NOW)
    assert (await service._intake.step(core, service.desk, asyncio.Lock())) is not None
    assert [d.job.id for d in core.decide(NOW)] == ["q"]
    assert await stores.requests.grant("q", worker_id="w1", worker_url="u", now=NOW)
    assert await stores.requests.requeue("q", now=NOW + 1)
    await _submit(stores, "n", NOW + 2)
    load_many = stores.requests.load_many
    outages = [StateUnavailable("stalled")]

    async def fail_once(ids: list[str]) -> list[RequestRecord]:
        if outages:
            raise outages.pop()
        return await load_many(ids)

    monkeypatch.setattr(stores.requests, "load_many", fail_once)
    term = LeaderTerm(1, 3600.0, 0.0, lambda: 0.0)
    loop = asyncio.create_task(_resilient(service._arrivals_loop, term))
    try:
        for _ in range(60):
            if core.pending:
                break
            await asyncio.sleep(0.05)
    finally:
        await stop_tasks([loop])
    assert outages == [] and set(core.pending) == {"q", "n"} and core.running == {}


async def test_the_intake_stops_skipping_once_past_the_rebuild_tail(stores: StateStores) -> None:
    await _submit(stores, "old", NOW)
    rebuilt = await rebuild(stores, "fcfs", NOW)
    intake = ArrivalsIntake(stores, rebuilt.arrivals_tail)
    desk = LendingDesk(stores.lending, 0, enabled=False, per_worker=1)
    await _submit(stores, "new", NOW + 1)
    taken = await intake.step(rebuilt.core, desk, asyncio.Lock())
    assert taken is not None and taken.announced == 1  # "old" skipped: already queued
    assert set(rebuilt.core.pending) == {"old", "new"}
    assert intake._rebuilt_to == NO_ENTRY


async def test_a_requeue_before_the_rebuild_tail_is_still_applied_by_its_record(
    stores: StateStores,
) -> None:
    """A re-queue is never skipped by the tail: its record decides (here: still queued, so
    the failed worker is marked and the request stays queued once)."""
    await _submit(stores, "q", NOW)
    assert await stores.requests.grant("q", worker_id="w1", worker_url="u", now=NOW)
    assert await stores.requests.requeue("q", now=NOW + 1)
    rebuilt = await rebuild(stores, "fcfs", NOW + 2)
    core = rebuilt.core
    assert set(core.pending) == {"q"} and not core.workers["w1"].failed
    desk = LendingDesk(stores.lending, 0, enabled=False, per_worker=1)
    arrivals = await read_all(stores)
    taken = await take_in(core, stores, desk, arrivals, NOW + 2, rebuilt_to=rebuilt.arrivals_tail)
    assert taken.announced == 1 and set(core.pending) == {"q"} and core.running == {}
    assert core.workers["w1"].failed


async def test_a_read_whose_reply_was_lost_is_read_again(
    redis_url: str, stores: StateStores, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The read of `q` and `n` runs in Redis and its reply is lost (a stall's timeout). The
    leader's arrivals loop restarts and must still queue both: read through the group with
    NOACK, the batch was delivered for good and both waited for their queue timeout."""
    service = SchedulerService(Settings(redis_url=redis_url, cluster="intake"), stores, "s1")
    service.core = core = (await rebuild(stores, "fcfs", NOW)).core
    service.desk = LendingDesk(stores.lending, 0, enabled=False, per_worker=1)
    await _submit(stores, "q", NOW)
    await _submit(stores, "n", NOW + 1)
    redis = stores.redis
    lost: list[str] = []

    def losing(name: str) -> Callable[..., Awaitable[Any]]:
        real = getattr(redis, name)

        async def read(*args: Any, **kwargs: Any) -> Any:
            reply = await real(*args, **kwargs)
            if not lost:
                lost.append(name)
                raise RedisTimeout("the reply was lost")
            return reply

        return read

    for name in ("xread", "xreadgroup"):
        monkeypatch.setattr(redis, name, losing(name))
    term = LeaderTerm(1, 3600.0, 0.0, lambda: 0.0)
    loop = asyncio.create_task(_resilient(service._arrivals_loop, term))
    try:
        for _ in range(60):
            if len(core.pending) == 2:
                break
            await asyncio.sleep(0.05)
    finally:
        await stop_tasks([loop])
    assert lost and set(core.pending) == {"q", "n"}


async def test_a_requeue_read_again_rests_its_worker_only_for_what_is_left(
    stores: StateStores,
) -> None:
    """A new term re-reads the arrivals its predecessor applied since its last mark. A re-queue
    among them marks the worker that failed it from the re-queue's time: one whose cool-down
    is over leaves the worker alone (before: every takeover rested it again for 5 s), and an
    old one never shortens a later failure's cool-down."""
    await _submit(stores, "q", NOW)
    assert await stores.requests.grant("q", worker_id="w1", worker_url="u", now=NOW)
    assert await stores.requests.requeue("q", now=NOW + 1)
    core = (await rebuild(stores, "fcfs", NOW + 20)).core
    desk = LendingDesk(stores.lending, 0, enabled=False, per_worker=1)
    cooldown = core.failure_cooldown_s
    await take_in(core, stores, desk, await read_all(stores), NOW + 2 + cooldown)
    assert not core.workers["w1"].failed  # over since NOW + 1 + cooldown
    core.worker_failed("w1", NOW + 30)
    await take_in(core, stores, desk, await read_all(stores), NOW + 1.5)
    assert core.workers["w1"].failed_until == NOW + 30 + cooldown
