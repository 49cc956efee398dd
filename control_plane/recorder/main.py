"""`arbiter recorder`: a standalone recorder process (completion events → SQL)."""

from __future__ import annotations

import asyncio
import logging
import os
import random
import signal
import socket
import time
from pathlib import Path

from prometheus_client import start_http_server

from control_plane.recorder.database import migrate_when_reachable
from control_plane.recorder.service import Recorder
from control_plane.settings import Settings
from control_plane.state import StateStores, sentinel_of
from control_plane.state.tasks import stop_tasks
from storage.db import Database

AUTOGROUP_TRIES = 10


async def run_recorder(settings: Settings) -> None:
    """Run until SIGTERM/SIGINT, at the nice value `recorder_nice` above the one it started at."""
    # in a thread: the autogroup write may be retried for up to about 2 s (`_lower_own_session`)
    await asyncio.to_thread(lower_priority, settings.recorder_nice)
    consumer = f"rec-{settings.recorder_name or f'{socket.gethostname()}-{os.getpid()}'}"
    stores = StateStores.open(
        settings.redis_url,
        settings.cluster,
        client_name=consumer,
        sentinel=sentinel_of(settings),
        multiplex=settings.redis_multiplex,
    )
    db = Database(settings.database_url)
    await migrate_when_reachable(db)
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


def lower_priority(by: int) -> None:
    """Raise this process's nice value by `by` (capped at 19), where the kernel will weigh it.

    Linux sets a nice value per thread, and libraries start threads at import (OpenBLAS's), so
    each present thread is set; threads started later inherit it. With autogroups on (the
    default of most distributions), a nice value only orders the threads of one session, and
    sessions share the CPU equally: `arbiter up` starts each child in its own session, so a
    recorder that leads its own session also raises its session's nice value (a recorder in a
    shared session, a shell's, leaves it: that would lower its neighbours too). Raising needs
    no privilege; a refusal only warns."""
    if by <= 0:
        return
    tasks = Path("/proc/self/task")
    try:
        if not tasks.is_dir():
            os.nice(by)
            return
        for tid in (int(t.name) for t in tasks.iterdir()):
            try:
                now = os.getpriority(os.PRIO_PROCESS, tid)
                os.setpriority(os.PRIO_PROCESS, tid, min(19, now + by))
            except ProcessLookupError:  # the thread ended meanwhile
                continue
    except OSError as exc:
        logging.getLogger(__name__).warning("recorder priority left as it was: %s", exc)
        return
    try:
        _lower_own_session(by)
    except (OSError, ValueError, IndexError) as exc:
        logging.getLogger(__name__).warning("recorder session's priority left as it was: %s", exc)


def _lower_own_session(by: int) -> None:
    """Raise the autogroup nice value of the session this process leads (see `lower_priority`).
    Linux lets an unprivileged process change an autogroup's nice value once per 100 ms, on
    the whole machine (EAGAIN otherwise): recorders started together take turns."""
    group = Path("/proc/self/autogroup")
    if os.getsid(0) != os.getpid() or not group.exists():
        return
    now = int(group.read_text().split("nice")[1])  # "/autogroup-42 nice 0"
    for _ in range(AUTOGROUP_TRIES - 1):
        try:
            group.write_text(str(min(19, now + by)))
            return
        except BlockingIOError:
            time.sleep(random.uniform(0.1, 0.2))
    group.write_text(str(min(19, now + by)))
