"""Priority comes only from tenant records: an SLO header cannot buy the front of an EDF queue.

The real gateway app (in-process, real Redis and SQLite) queues two equal requests from one
tenant, the second with `X-Arbiter-SLO-TTFT-Ms: 1`; the scheduler core under `edf` then serves
them from what the gateway put in Redis. No scheduler runs meanwhile, so both stay queued.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from control_plane.api.app import create_app
from control_plane.contracts.knobs import PluginChoice
from control_plane.contracts.workers import WorkerEntry, WorkerSample
from control_plane.core.job import Job
from control_plane.core.ledger import Ledger
from control_plane.core.scheduler_core import SchedulerCore
from control_plane.scheduler.rebuild import build_core, job_from_record
from control_plane.scheduler.workers import observe, sync_workers
from control_plane.settings import Settings
from control_plane.state import StateStores
from control_plane.up.seed import ensure_demo_tenants
from storage.db import Database

MODEL = "tiny-llama"
BODY = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}


async def _queued_jobs(
    redis_url: str, tmp_path: Path, tenant_slo: dict[str, Any], headers: list[dict[str, str]]
) -> list[Job]:
    """Send one request per `headers` (in order), return their jobs as queued in Redis."""
    url = f"sqlite:///{tmp_path / 'arbiter.db'}"
    db = Database(url)
    db.migrate()
    key = ensure_demo_tenants(db, ["alpha"], {})["alpha"]
    if tenant_slo:
        with db.repos() as r:
            r.tenants.update_tenant(name="alpha", changes=tenant_slo)
    settings = Settings(redis_url=redis_url, database_url=url, queue_timeout_s=1.5)
    app = create_app(settings, db=db)
    try:
        async with app.router.lifespan_context(app):
            stores: StateStores = app.state.stores
            await stores.workers.upsert(WorkerEntry(id="w1", url="http://w1", model=MODEL))
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
                auth = {"Authorization": f"Bearer {key}"}
                sent = []
                for extra in headers:
                    post = client.post("/v1/chat/completions", json=BODY, headers={**auth, **extra})
                    sent.append(asyncio.create_task(post))
                    await _until_queued(stores, len(sent))
                records = await stores.requests.load_queued()
                answers = await asyncio.gather(*sent)  # 504 after the queue timeout
        assert [a.status_code for a in answers] == [504] * len(headers)
        parsed = [job_from_record(r) for r in records]
        return [p[0] for p in parsed if p is not None]
    finally:
        db.dispose()


async def _until_queued(stores: StateStores, n: int) -> None:
    """Poll Redis (the only place the gateway's queue is visible) until `n` are queued."""
    for _ in range(1000):
        if len(await stores.requests.queued_ids()) >= n:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"fewer than {n} requests queued after 10 s")


def _edf_core() -> SchedulerCore:
    core = build_core({"policy": PluginChoice("edf")}, Ledger(), "fcfs")
    sync_workers(core, [WorkerEntry(id="w1", url="http://w1", model=MODEL, max_num_seqs=1)])
    observe(core, "w1", WorkerSample(True, 0.0, models={MODEL: 2048}))
    return core


@pytest.mark.parametrize(
    "tenant_slo",
    [pytest.param({"slo_ttft_ms": 500.0}, id="record-500ms"), pytest.param({}, id="no-record")],
)
async def test_slo_header_is_not_served_ahead_under_edf(
    redis_url: str, tmp_path: Path, tenant_slo: dict[str, Any]
) -> None:
    plain, urgent = await _queued_jobs(
        redis_url, tmp_path, tenant_slo, [{}, {"X-Arbiter-SLO-TTFT-Ms": "1"}]
    )
    record_s = tenant_slo["slo_ttft_ms"] / 1000 if tenant_slo else None
    assert plain.slo.ttft_s == urgent.slo.ttft_s == record_s  # the header changed nothing
    core = _edf_core()
    for job in (plain, urgent):
        core.arrive(job, None, job.arrival)
    first = core.decide(urgent.arrival + 0.01)
    assert [d.job.id for d in first] == [plain.id]


async def test_slo_header_may_relax_the_record(redis_url: str, tmp_path: Path) -> None:
    (job,) = await _queued_jobs(
        redis_url, tmp_path, {"slo_ttft_ms": 500.0}, [{"X-Arbiter-SLO-TTFT-Ms": "2000"}]
    )
    assert job.slo.ttft_s == 2.0
