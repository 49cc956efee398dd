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
import logging
import shutil
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from control_plane.bench.up_process import free_port
from control_plane.contracts.events import Complete, Sender
from control_plane.core.job import Slo
from control_plane.recorder import service as recorder_service
from control_plane.recorder.service import GROUP, Recorder
from control_plane.state import StateStores
from control_plane.state.tasks import stop_tasks
from storage.db import Database

CLUSTER = "bench-recorder"
PUBLISH_CHUNK = 500
CATCH_UP_S = 300.0
START_TRIES = 3
COMPLAINT_CHARS = 240
READY = "Ready to accept connections"


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
    """A private `redis-server` on a free port, without persistence, in its own directory.

    A free port can be taken between choosing it and the server's bind, and a connection
    would then reach the port's other owner: the server counts as started only once its own
    log says it accepts connections, and one that exits first is restarted on another port."""

    def __init__(self, workdir: Path) -> None:
        exe = shutil.which("redis-server")
        if exe is None:
            raise RuntimeError("redis-server is not on PATH")
        self.log = workdir / "redis.log"
        for _ in range(START_TRIES):
            self.port = free_port()
            args = ["--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(workdir)]
            args += ["--save", "", "--appendonly", "no", "--logfile", str(self.log)]
            self.proc = subprocess.Popen([exe, *args], stdout=subprocess.DEVNULL)
            if self._ready():
                self.url = f"redis://127.0.0.1:{self.port}/0"
                return
        raise RuntimeError(f"redis-server did not start in {START_TRIES} tries ({self.log})")

    def _ready(self) -> bool:
        """True once this server's log says it accepts connections; False if it exits first."""
        deadline = time.monotonic() + 15
        while self.proc.poll() is None and time.monotonic() < deadline:
            if self.log.exists() and READY in self.log.read_text(errors="replace"):
                return True
            time.sleep(0.02)
        self.stop()
        return False

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


async def _round(
    redis_url: str, db: Database, batch: int, events: int, catch_up_s: float
) -> RecorderSample:
    stores = StateStores.open(redis_url, CLUSTER)
    complaints = _Complaints()
    logging.getLogger(recorder_service.__name__).addHandler(complaints)
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
        deadline = wall0 + catch_up_s
        while left := (await stores.events.unconsumed()).get(GROUP, 0):
            if task.done():
                task.result()
            if time.monotonic() > deadline:
                await stop_tasks([task])
                raise RuntimeError(
                    f"the recorder left {left} of {events} events after {catch_up_s:.0f} s "
                    f"({recorder.written} rows written, {recorder.dead_lettered} dead-lettered; "
                    f"it said: {complaints.said() or 'nothing'})"
                )
            await asyncio.sleep(0.01)
        cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
        await stop_tasks([task])  # not cancel-and-wait: a cancellation can be lost
        if recorder.written != events:
            raise RuntimeError(f"recorded {recorder.written} of {events} events")
        return RecorderSample(batch, events, cpu, wall)
    finally:
        logging.getLogger(recorder_service.__name__).removeHandler(complaints)
        await stores.aclose()


class _Complaints(logging.Handler):
    """The recorder's warnings and errors during a round, kept to explain a round that stalls."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record.getMessage().splitlines()[0][:COMPLAINT_CHARS])

    def said(self) -> str:
        return "; ".join(self.records[-3:])


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


def measure(
    batches: Sequence[int], events: int, rounds: int, catch_up_s: float = CATCH_UP_S
) -> list[RecorderSample]:
    """Every batch size `rounds` times, interleaved; a fresh Redis and database each time. A
    round whose recorder has not caught up within `catch_up_s` raises, with what it logged."""
    samples = []
    for _ in range(rounds):
        for batch in batches:
            with ExitStack() as stack:
                work = Path(tempfile.mkdtemp(prefix="arb-bench-rec-"))
                stack.callback(shutil.rmtree, work, ignore_errors=True)
                redis = _Redis(work)
                stack.callback(redis.stop)
                db = Database(f"sqlite:///{work / 'rec.db'}")
                stack.callback(db.dispose)
                db.migrate()
                samples.append(asyncio.run(_round(redis.url, db, batch, events, catch_up_s)))
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
