"""One batch of the `arrivals` stream, as the leader takes it in.

Rule: fast-lane takes are adopted first (already granted: `LendingDesk.adopt`), then first
submissions are queued with the envelope they carry, then re-queues are read from their hash
(the worker that failed them is marked, atomically with the re-queue). A take and the
re-queue of the same request arrive in that order on the stream, so they are applied in it.
A first submission of a request the core already runs is stale and skipped: a new leader's
rebuild found it queued in Redis before its arrival was read, and granted it (queueing it
again would free its slot in the core while its worker serves it: an over-commit).
"""

from __future__ import annotations

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
) -> int:
    """Apply one batch; → how many requests it announced. Failures are dead-lettered."""
    takes = [a for a in arrivals if a.worker is not None]
    failed = desk.adopt(core, takes, now)
    requeued = [a.id for a in arrivals if a.envelope is None]
    again = await stores.requests.load_many(requeued) if requeued else []
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
