"""`arbiter recorder`: a standalone recorder process (completion events → SQL)."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket

from prometheus_client import start_http_server

from control_plane.recorder.service import Recorder
from control_plane.settings import Settings
from control_plane.state import StateStores, sentinel_of
from control_plane.state.tasks import stop_tasks
from storage.db import Database


async def run_recorder(settings: Settings) -> None:
    """Run until SIGTERM/SIGINT."""
    consumer = f"rec-{settings.recorder_name or f'{socket.gethostname()}-{os.getpid()}'}"
    stores = StateStores.open(
        settings.redis_url,
        settings.cluster,
        client_name=consumer,
        sentinel=sentinel_of(settings),
        multiplex=settings.redis_multiplex,
    )
    db = Database(settings.database_url)
    await asyncio.to_thread(db.migrate)
    recorder = Recorder(
        stores,
        db,
        consumer,
        batch=settings.recorder_batch,
        interval_s=settings.recorder_interval_s,
        claim_idle_s=settings.recorder_claim_idle_s,
        min_gap_s=settings.recorder_min_gap_s,
    )
    serve_metrics(recorder, settings)
    task = asyncio.create_task(recorder.run())
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await stop_tasks([task], within_s=10.0)
    await stores.aclose()
    db.dispose()


def serve_metrics(recorder: Recorder, settings: Settings) -> None:
    """Serve the recorder's metrics on `recorder_metrics_port` (a busy port only warns)."""
    if settings.recorder_metrics_port <= 0:
        return
    try:
        start_http_server(
            settings.recorder_metrics_port, addr=settings.host, registry=recorder.metrics.registry
        )
    except OSError as exc:
        logging.getLogger(__name__).warning("recorder metrics not served: %s", exc)
