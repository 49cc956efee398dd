"""`arbiter recorder`: a standalone recorder process (completion events → SQL)."""

from __future__ import annotations

import asyncio
import os
import signal
import socket

from control_plane.recorder.service import Recorder
from control_plane.settings import Settings
from control_plane.state import StateStores
from storage.db import Database


async def run_recorder(settings: Settings) -> None:
    """Run until SIGTERM/SIGINT."""
    consumer = f"rec-{socket.gethostname()}-{os.getpid()}"
    stores = StateStores.open(settings.redis_url, settings.cluster, client_name=consumer)
    db = Database(settings.database_url)
    await asyncio.to_thread(db.migrate)
    recorder = Recorder(
        stores,
        db,
        consumer,
        batch=settings.recorder_batch,
        interval_s=settings.recorder_interval_s,
        claim_idle_s=settings.recorder_claim_idle_s,
    )
    task = asyncio.create_task(recorder.run())
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await stores.aclose()
    db.dispose()
