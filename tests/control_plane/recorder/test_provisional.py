"""The in-flight audit's row is provisional, through the real events stream: a restarted
recorder (a new consumer name) reads the audit's `complete` before it claims its
predecessor's pending entry holding the real one. Before, the audit's row won for good (the
leader's charged tokens, no latencies); now the real completion replaces it and the rollups
are those of recording it alone."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

from control_plane.contracts.events import LOST_COMPLETION, Complete, Sender
from control_plane.core.job import Slo
from control_plane.recorder.rows import request_row
from control_plane.recorder.service import GROUP, Recorder
from control_plane.state import StateStores
from control_plane.state.tasks import stop_tasks
from storage.db import Database
from storage.write_guard import write_requests
from tests.control_plane.recorder.test_poison import eventually
from tests.storage.test_provisional_rows import assert_same_rollups, snapshot, wipe

NOW = time.time()
SENDER = Sender("acme", "chat", "planner", "tiny", slo=Slo(ttft_s=0.5))


def completion(rid: str, **changes: object) -> Complete:
    """A request's real completion as its gateway sends it."""
    fields: dict[str, object] = dict(
        id=rid, status="ok", finished=NOW + 3.0, n_in=120, n_out=57, sender=SENDER,
        arrival=NOW, dispatched=NOW + 0.5, first_token=NOW + 0.7, worker="w1", policy="vtc",
    )  # fmt: skip
    return Complete(**{**fields, **changes})  # type: ignore[arg-type]


def audited(rid: str) -> Complete:
    """The leader's in-flight audit's `complete` for the same request (`slot_audit.ending`)."""
    return completion(rid, error=LOST_COMPLETION, first_token=None, n_out=200, policy=None,
                      finished=NOW + 9.0)  # fmt: skip


@contextlib.asynccontextmanager
async def restarted(stores: StateStores, db: Database) -> AsyncIterator[Recorder]:
    recorder = Recorder(stores, db, "rec-new", batch=50, interval_s=0.05, claim_idle_s=2.0)
    task = asyncio.create_task(recorder.run())
    try:
        yield recorder
    finally:
        await stop_tasks([task])


async def _settled(stores: StateStores, db: Database, ids: set[str]) -> bool:
    if await stores.events.pending_count(GROUP) != 0:
        return False
    requests, _ = await asyncio.to_thread(snapshot, db)
    return ids <= set(requests)


async def test_a_real_completion_claimed_after_the_audit_row_replaces_it(
    stores: StateStores, db: Database
) -> None:
    others = [completion(f"bg-{i}", n_out=10 + i, arrival=NOW + i) for i in range(5)]
    await stores.events.publish([*others, completion("r1")])
    taken = await stores.events.read(GROUP, "rec-old", count=50, block_ms=None)
    assert len(taken) == 6  # the old recorder died holding them, unacknowledged
    await stores.events.publish([audited("r1")])

    async with restarted(stores, db) as recorder:
        await eventually(lambda: _settled(stores, db, {"r1", *(e.id for e in others)}))
        assert recorder.replaced == 1, "the claim came first: the test proves nothing"
        assert recorder.metrics.rows_replaced._value.get() == 1
        assert recorder.written == 6  # each request once
        assert recorder.metrics.rows_written._value.get() == 6

    got_requests, got_rollups = snapshot(db)
    wanted = [request_row(e, None) for e in [*others, completion("r1")]]
    assert got_requests["r1"] == wanted[-1]
    wipe(db)
    write_requests(db, [row for row in wanted if row is not None])
    want_requests, want_rollups = snapshot(db)
    assert got_requests == want_requests
    assert_same_rollups(got_rollups, want_rollups, exact=False)
