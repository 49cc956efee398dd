"""`arbiter scheduler`: one scheduler replica (leader or standby), optionally with the recorder.

Serves `/healthz`, `/readyz` (503 while Redis does not answer; else 200 with the role, `leader`
only while this replica's lease term is valid) and `/metrics` on
`settings.scheduler_port`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import uvicorn
from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from control_plane.recorder.database import migrate_when_reachable
from control_plane.recorder.service import Recorder
from control_plane.scheduler.loop_watch import watch_loop
from control_plane.scheduler.service import SchedulerService
from control_plane.scheduler.warm import warm_imports
from control_plane.settings import Settings
from control_plane.state import StateStores, StateUnavailable, ping, sentinel_of
from control_plane.state.tasks import stop_tasks
from storage.db import Database

log = logging.getLogger(__name__)


class QuietServer(uvicorn.Server):
    """A uvicorn server that leaves signal handling to its host process."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def status_app(service: SchedulerService, extra: Sequence[CollectorRegistry] = ()) -> FastAPI:
    """`/healthz`, `/readyz` and `/metrics` (the scheduler's registry, then each of `extra`,
    e.g. the recorder's when it runs in this process)."""
    app = FastAPI(title="Arbiter scheduler")

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok", "holder": service.holder}

    @app.get("/readyz")
    async def readyz() -> Response:
        """503 while Redis does not answer (within 1 s); else 200 with the honest role:
        `leader` only while this replica's lease term is valid, else `standby`."""
        body: dict[str, Any] = {"holder": service.holder, "fencing_token": service.fencing_token}
        try:
            async with asyncio.timeout(1.0):
                await ping(service.stores.redis)
                leader = await service.stores.lease.holder()
        except (StateUnavailable, TimeoutError) as exc:
            role = "leader" if service.leading else "standby"
            reason = str(exc) or "redis did not answer within 1s"
            return JSONResponse(
                {
                    "status": "unavailable",
                    "role": role,
                    "redis": "unavailable",
                    "reason": reason,
                    **body,
                },
                status_code=503,
                headers={"Retry-After": "1"},
            )
        role = "leader" if service.leading else "standby"
        return JSONResponse(
            {"status": "ready", "role": role, "redis": "ok", "leader": leader, **body}
        )

    @app.get("/metrics")
    async def metrics() -> Response:
        body = b"".join(generate_latest(r) for r in (service.metrics.registry, *extra))
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    return app


async def _warm_then_run(service: SchedulerService) -> None:
    await warm_imports()
    await service.run()


async def run_scheduler(settings: Settings, *, with_recorder: bool = False) -> None:
    """Run until SIGTERM/SIGINT; the lease is released on the way out."""
    holder = f"sched-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    stores = StateStores.open(
        settings.redis_url,
        settings.cluster,
        client_name=holder,
        sentinel=sentinel_of(settings),
        multiplex=settings.redis_multiplex,
    )
    service = SchedulerService(settings, stores, holder)
    db = Database(settings.database_url) if with_recorder else None
    tasks = [
        asyncio.create_task(_warm_then_run(service), name="scheduler"),
        asyncio.create_task(watch_loop(service.metrics.loop_late_seconds.observe), name="loop"),
    ]
    registries: list[CollectorRegistry] = []
    if db is not None:
        await migrate_when_reachable(db)
        recorder = Recorder(
            stores,
            db,
            f"rec-{settings.recorder_name or holder}",
            batch=settings.recorder_batch,
            interval_s=settings.recorder_interval_s,
            claim_idle_s=settings.recorder_claim_idle_s,
            min_gap_s=settings.recorder_min_gap_s,
        )
        tasks.append(asyncio.create_task(recorder.run(), name="recorder"))
        registries.append(recorder.metrics.registry)
    server = QuietServer(
        uvicorn.Config(
            status_app(service, registries),
            host=settings.host,
            port=settings.scheduler_port,
            log_level="warning",
            access_log=False,
        )
    )
    status = asyncio.create_task(server.serve(), name="status")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("scheduler %s stopping", holder)
    server.should_exit = True
    await asyncio.wait([status], timeout=5.0)  # let the status server close by itself
    await stop_tasks([*tasks, status], within_s=10.0)
    with contextlib.suppress(StateUnavailable):
        await stores.lease.release(holder, token=stores.lease.token)
    await stores.aclose()
    if db is not None:
        db.dispose()
