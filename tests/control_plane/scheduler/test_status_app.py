"""The scheduler's status server: `/metrics` carries the recorder's metrics (rows written, dead
letters) when the recorder runs in the scheduler process."""

from __future__ import annotations

import httpx

from control_plane.recorder.metrics import RecorderMetrics
from control_plane.scheduler.main import status_app
from control_plane.scheduler.service import SchedulerService
from control_plane.settings import Settings
from control_plane.state import StateStores


async def test_metrics_include_the_recorders_registry(redis_url: str) -> None:
    stores = StateStores.open(redis_url, "status-test")
    service = SchedulerService(Settings(redis_url=redis_url), stores, "sched-test")
    recorder = RecorderMetrics()
    recorder.dead_letters.labels("recorder", "row_refused").inc()
    try:
        transport = httpx.ASGITransport(app=status_app(service, [recorder.registry]))
        async with httpx.AsyncClient(transport=transport, base_url="http://s") as client:
            body = (await client.get("/metrics")).text
            alone = status_app(service)
            transport_alone = httpx.ASGITransport(app=alone)
            async with httpx.AsyncClient(transport=transport_alone, base_url="http://s") as c2:
                plain = (await c2.get("/metrics")).text
    finally:
        await service.http.aclose()
        await stores.aclose()

    assert 'arbiter_dead_letters_total{consumer="recorder",reason="row_refused"} 1.0' in body
    assert "arbiter_scheduler_leader 0.0" in body and "arbiter_scheduler_leader 0.0" in plain
    assert "arbiter_dead_letters" not in plain
