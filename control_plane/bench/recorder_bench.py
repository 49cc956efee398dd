"""`arbiter bench recorder`: the recorder's CPU per request, by batch size, on SQLite.

Each round starts a private `redis-server` (no persistence), publishes `events` `complete`
events shaped like the overhead bench's requests (one tenant, streamed, every timestamp set),
then runs the real `Recorder` — reads, conversion, the SQL transaction with its rollups,
acknowledgements, `mark_recorded` — over a freshly migrated SQLite file (`arbiter up`'s
default database) until its consumer group
has caught up. The process's CPU time (every thread: the SQL work runs in one) from the first
read to the last acknowledgement, divided by the events, is the cost quoted; wall time beside
it. Publishing is outside the meter. Batch sizes stand for load: at c=1 the recorder's reads
carry about 48 events (one every 0.1 s), at c=64 a few hundred.
"""

from __future__ import annotations

import asyncio
import shutil
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from control_plane.bench.up_process import free_port
from control_plane.contracts.events import Complete, Sender
from control_plane.core.job import Slo
from control_plane.recorder.service import GROUP, Recorder
from control_plane.state import StateStores
from storage.db import Database

CLUSTER = "bench-recorder"
PUBLISH_CHUNK = 500
CATCH_UP_S = 300.0


@dataclass(frozen=True, slots=True)
class RecorderSample:
    """One round: `events` recorded in batches of `batch`."""

    batch: int
    events: int
    cpu_s: float
    wall_s: float

    @property
    def cpu_us_per_event(self) -> float:
        return self.cpu_s / self.events * 1e6


def _event(i: int, t0: float) -> Complete:
    arrival = t0 + i * 0.002
    return Complete(
        id=f"bench-{uuid.uuid4().hex}",
        status="ok",
        finished=arrival + 0.0021,
        n_in=12,
        n_out=16,
        sender=Sender(tenant="bench", model="sim", slo=Slo(ttft_s=1.0)),
        arrival=arrival,
        dispatched=arrival + 0.0004,
        first_token=arrival + 0.0012,
        worker="w0",
        policy="vtc",
    )


class _Redis:
    """A private `redis-server` on a free port, without persistence."""

    def __init__(self) -> None:
        exe = shutil.which("redis-server")
        if exe is None:
            raise RuntimeError("redis-server is not on PATH")
        self.port = free_port()
        args = ["--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        self.proc = subprocess.Popen([exe, *args], stdout=subprocess.DEVNULL)
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


async def _round(redis_url: str, db: Database, batch: int, events: int) -> RecorderSample:
    stores = StateStores.open(redis_url, CLUSTER)
    try:
        await _until_answers(stores)
        await stores.events.ensure_groups()
        t0 = time.time()
        for start in range(0, events, PUBLISH_CHUNK):
            chunk = range(start, min(events, start + PUBLISH_CHUNK))
            await stores.events.publish([_event(i, t0) for i in chunk])
        recorder = Recorder(stores, db, "bench", batch=batch, interval_s=0.05)
        cpu0, wall0 = time.process_time(), time.monotonic()
        task = asyncio.create_task(recorder.run())
        deadline = wall0 + CATCH_UP_S
        while left := (await stores.events.unconsumed()).get(GROUP, 0):
            if task.done():
                task.result()
            if time.monotonic() > deadline:
                task.cancel()
                raise RuntimeError(
                    f"the recorder left {left} of {events} events after {CATCH_UP_S:.0f} s "
                    f"({recorder.written} rows written)"
                )
            await asyncio.sleep(0.01)
        cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        if recorder.written != events:
            raise RuntimeError(f"recorded {recorder.written} of {events} events")
        return RecorderSample(batch, events, cpu, wall)
    finally:
        await stores.aclose()


async def _until_answers(stores: StateStores) -> None:
    deadline = time.monotonic() + 15
    while True:
        try:
            await stores.events.unconsumed()
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)


def measure(batches: Sequence[int], events: int, rounds: int) -> list[RecorderSample]:
    """Every batch size `rounds` times, interleaved; a fresh Redis and database each time."""
    samples = []
    for _ in range(rounds):
        for batch in batches:
            redis, work = _Redis(), Path(tempfile.mkdtemp(prefix="arb-bench-rec-"))
            db = Database(f"sqlite:///{work / 'rec.db'}")
            try:
                db.migrate()
                samples.append(asyncio.run(_round(redis.url, db, batch, events)))
            finally:
                db.dispose()
                redis.stop()
                shutil.rmtree(work, ignore_errors=True)
    return samples


def summary(samples: Sequence[RecorderSample]) -> list[dict[str, Any]]:
    """Per batch size: the median CPU µs per event over rounds, and every round."""
    groups: dict[int, list[RecorderSample]] = {}
    for s in samples:
        groups.setdefault(s.batch, []).append(s)
    out: list[dict[str, Any]] = []
    for batch, runs in groups.items():
        out.append(
            {
                "batch": batch,
                "events": runs[0].events,
                "cpu_us_per_event_median": statistics.median(r.cpu_us_per_event for r in runs),
                "rounds": [{**asdict(r), "cpu_us_per_event": r.cpu_us_per_event} for r in runs],
            }
        )
    return out
