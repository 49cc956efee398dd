"""One batch of the `arrivals` stream, as the leader takes it in.

Rule: fast-lane takes are adopted first (already granted: `LendingDesk.adopt`), then first
submissions are queued with the envelope they carry, then re-queues are read from their hash
(the worker that failed them is marked, atomically with the re-queue). A take and the
re-queue of the same request arrive in that order on the stream, so they are applied in it.
A first submission of a request the core already runs is stale and skipped: a new leader's
rebuild found it queued in Redis before its arrival was read, and granted it (queueing it
again would free its slot in the core while its worker serves it: an over-commit); it is
checked after the batch's last await. A re-queue is applied only if its record, read from
Redis, still says `queued`; that read waits until no cycle's grants are being written, so a
request a cycle granted since (the rebuild found it re-queued) reads `granted` and is kept
running, never `queued` from before its grant landed.
"""

from __future__ import annotations

import asyncio
import contextlib

from control_plane.core.scheduler_core import SchedulerCore
from control_plane.scheduler.entries import arrive_each, dead_letter_all
from control_plane.scheduler.lending import LendingDesk
from control_plane.state import StateStores
from control_plane.state.arrivals import Arrival


async def take_in(
    core: SchedulerCore,
    stores: StateStores,
    desk: LendingDesk,
    arrivals: list[Arrival],
    now: float,
    deciding: asyncio.Lock | None = None,
) -> int:
    """Apply one batch; → how many requests it announced. Failures are dead-lettered.

    `deciding` is the lock the dispatch loop holds from a cycle's decisions until their
    grants are written; the re-queues' records are read under it (see the module docstring).
    """
    takes = [a for a in arrivals if a.worker is not None]
    failed = desk.adopt(core, takes, now)
    requeued = [a.id for a in arrivals if a.envelope is None]
    again = []
    if requeued:
        async with deciding or contextlib.nullcontext():
            again = await stores.requests.load_many(requeued)
    for record in again:
        if record.prev_worker:
            core.worker_failed(record.prev_worker, now)
    records = [  # read after the await: the dispatch loop may have granted meanwhile
        (a.entry_id, a.record())
        for a in arrivals
        if a.envelope and a.worker is None and a.id not in core.running
    ]
    records += [(f"request {r.id}", r) for r in again]
    failed += arrive_each(core, records, now)
    await dead_letter_all(stores.dead_letters, "arrivals", failed)
    return len(takes) + len(records)
