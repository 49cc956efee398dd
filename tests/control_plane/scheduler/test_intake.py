"""The leader's intake of the arrivals stream, against a real redis-server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from control_plane.contracts.requests import Envelope, RequestRecord
from control_plane.contracts.workers import WorkerEntry, WorkerSample
from control_plane.core.job import Job
from control_plane.scheduler.intake import take_in
from control_plane.scheduler.lending import LendingDesk
from control_plane.scheduler.rebuild import rebuild
from control_plane.scheduler.workers import observe
from control_plane.state import StateStores

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


async def test_an_arrival_a_new_leader_already_granted_does_not_free_its_slot(
    stores: StateStores,
) -> None:
    """Requests queued while no leader ran: the rebuild finds them in Redis, the first cycle
    grants what fits, and only then are their arrivals read. They must stay running on their
    worker (the slot counted), not be queued again for a second grant."""
    for i, rid in enumerate(["r1", "r2", "r3"]):
        await _submit(stores, rid, NOW + i)
    core = await rebuild(stores, "fcfs", NOW)
    observe(core, "w1", WorkerSample(True, NOW, models={"m": 4096}))
    granted = [d.job.id for d in core.decide(NOW)]
    assert granted == ["r1", "r2"]  # max_num_seqs = 2
    for rid in granted:
        assert await stores.requests.grant(rid, worker_id="w1", worker_url="u", now=NOW)
    desk = LendingDesk(stores.lending, 0, enabled=False, per_worker=1)

    arrivals = await stores.arrivals.read_entries("s", count=10, block_ms=None)
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
    must not queue them again."""
    await _submit(stores, "q", NOW)
    assert await stores.requests.grant("q", worker_id="w1", worker_url="u", now=NOW)
    assert await stores.requests.requeue("q", now=NOW + 1)  # its worker failed
    await _submit(stores, "r", NOW + 2)
    core = await rebuild(stores, "fcfs", NOW + 3)
    observe(core, "w1", WorkerSample(True, NOW, models={"m": 4096}))
    assert set(core.pending) == {"q", "r"}
    arrivals = await stores.arrivals.read_entries("s", count=10, block_ms=None)
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
    core = await rebuild(stores, "fcfs", NOW + 2)
    observe(core, "w1", WorkerSample(True, NOW, models={"m": 4096}))
    arrivals = await stores.arrivals.read_entries("s", count=10, block_ms=None)
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
