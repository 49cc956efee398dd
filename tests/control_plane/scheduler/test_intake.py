"""The leader's intake of the arrivals stream, against a real redis-server."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from control_plane.contracts.requests import Envelope
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
