"""Writing a cycle's grants, against a real redis-server."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from control_plane.contracts.requests import Envelope
from control_plane.contracts.workers import WorkerEntry, WorkerSample
from control_plane.core.job import Job
from control_plane.scheduler.granting import grant
from control_plane.scheduler.leader import LeaderTerm
from control_plane.scheduler.metrics import SchedulerMetrics
from control_plane.scheduler.rebuild import rebuild
from control_plane.scheduler.workers import observe
from control_plane.state import StateStores

WORKER = WorkerEntry(id="w1", url="http://w1", model="m", max_num_seqs=2)
NOW = 1_000.0


@pytest.fixture
async def stores(redis_url: str) -> AsyncIterator[StateStores]:
    s = StateStores.open(redis_url, "granting")
    await s.workers.upsert(WORKER)
    yield s
    await s.aclose()


async def test_each_grant_names_the_policy_that_decided_it(stores: StateStores) -> None:
    job = Job(id="r", tenant="a", arrival=NOW, n_in=10, max_tokens=20, model="m")
    result = await stores.requests.submit(
        Envelope(job, {}, "gw"), request_id="r", tenant="a", gateway_id="gw", queue_cap=9, now=NOW
    )
    assert result.accepted
    core = (await rebuild(stores, "wfq", NOW)).core
    observe(core, "w1", WorkerSample(True, NOW, models={"m": 4096}))
    assert await stores.lease.acquire("s1", 60.0, NOW, fresh=True)
    token = stores.lease.token
    assert token is not None
    term = LeaderTerm(token, 3600.0, 0.0, lambda: 0.0)

    assert await grant(stores, core, core.decide(NOW), term, SchedulerMetrics())

    ((_, granted),) = await stores.grants.read("gw", "0-0", block_ms=None)
    assert (granted.request_id, granted.policy) == ("r", "wfq")
