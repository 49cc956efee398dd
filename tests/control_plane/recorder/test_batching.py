"""Batches sized by load: under a steady trickle of events, `min_gap_s` makes the recorder
write fewer, larger SQL transactions, and every row still lands."""

from __future__ import annotations

import asyncio
import time

import sqlalchemy as sa

from control_plane.recorder.service import Recorder
from control_plane.state import StateStores
from control_plane.state.tasks import stop_tasks
from storage.db import Database
from tests.control_plane.recorder.test_poison import complete, eventually, ids_in, publish

EVENTS = 120
PACE_S = 0.01  # 100 events a second, one at a time


async def _commits_while_trickling(
    stores: StateStores, db: Database, gap_s: float
) -> tuple[int, float]:
    """Commits the recorder made for `EVENTS` events sent one by one, `PACE_S` apart, and
    the seconds until every row was in."""
    commits = 0

    def counted(_conn: object) -> None:
        nonlocal commits
        commits += 1

    sa.event.listen(db.engine, "commit", counted)
    recorder = Recorder(stores, db, "rec-b", batch=200, interval_s=0.05, min_gap_s=gap_s)
    task = asyncio.create_task(recorder.run())
    try:
        await asyncio.sleep(0.2)  # the recorder is reading before the first event
        before, started = commits, time.monotonic()
        ids = [f"{gap_s}-{i}" for i in range(EVENTS)]
        for rid in ids:
            await publish(stores, [complete(rid)])
            await asyncio.sleep(PACE_S)
        await eventually(lambda: asyncio.to_thread(lambda: set(ids) <= ids_in(db)))
        return commits - before, time.monotonic() - started
    finally:
        await stop_tasks([task])
        sa.event.remove(db.engine, "commit", counted)


async def test_a_write_gap_makes_fewer_larger_transactions(
    stores: StateStores, db: Database
) -> None:
    eager, _ = await _commits_while_trickling(stores, db, 0.0)
    gapped, took = await _commits_while_trickling(stores, db, 0.25)

    # ~1.2 s of trickle (longer on a loaded box): at most one write per 0.25 s, plus the last
    # one; without the gap the recorder writes whatever each read brought (here: each event)
    assert gapped <= took / 0.25 + 2, (eager, gapped, took)
    assert eager >= 3 * gapped, (eager, gapped)
