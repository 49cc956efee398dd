"""One batch of the `arrivals` stream, as the leader takes it in.

Rule: fast-lane takes are adopted first (already granted: `LendingDesk.adopt`), then first
submissions are queued with the envelope they carry, then re-queues are read from their hash
(the worker that failed them is marked, atomically with the re-queue). A take and the
re-queue of the same request arrive in that order on the stream, so they are applied in it.

First submissions at or before the tail a new leader's rebuild read with the queue and the
in-flight map (`Rebuilt`) are skipped: the rebuild holds their effect, as a queued request
or as one gone from the queue (granted, and maybe completed since; withdrawn; timed out).
Applying one would queue its request again — charged, and granted a second time or refused.
A first submission of a request the core already runs is skipped in any case (checked after
the batch's last await: its slot must not be freed while its worker serves it). Fast-lane
takes at or before the tail are the predecessor's, which `LendingDesk.adopt` ignores.

A re-queue, before the tail or after it, is applied only if its record, read from Redis,
still says `queued`; that read waits until no cycle's grants are being written, so a request
a cycle granted since reads `granted` and is kept running, never `queued` from before its
grant landed. Its failed worker is marked either way, from the re-queue's time (`requeued_at`),
so a re-queue read again by a new term (which starts at its predecessor's last mark) rests
the worker only for what is left of that cool-down.

Guarantee: the batch is applied whole or not at all. Its only read comes before anything is
applied, so a Redis outage during it leaves the core untouched and `ArrivalsIntake` applies the
same batch again (dropping it would leave its requests queued in Redis and unknown to the
leader until the next takeover).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field

from control_plane.core.scheduler_core import SchedulerCore
from control_plane.scheduler.entries import Failure, arrive_each, dead_letter_all
from control_plane.scheduler.lending import LendingDesk
from control_plane.state import StateStores
from control_plane.state.arrivals import Arrival
from control_plane.state.inflight_view import NO_ENTRY
from control_plane.state.trimming import parse_id

BATCH = 512
"""Arrivals read per call."""


@dataclass(frozen=True, slots=True)
class Taken:
    """What one batch did: requests it announced (takes adopted or queued), and the entries
    that could not be applied (to be dead-lettered)."""

    announced: int
    failed: list[Failure] = field(default_factory=list)


async def take_in(
    core: SchedulerCore,
    stores: StateStores,
    desk: LendingDesk,
    arrivals: list[Arrival],
    now: float,
    deciding: asyncio.Lock | None = None,
    rebuilt_to: str = NO_ENTRY,
) -> Taken:
    """Apply one batch (see the module docstring); raises only before applying anything.

    `deciding` is the lock the dispatch loop holds from a cycle's decisions until their
    grants are written; the re-queues' records are read under it. `rebuilt_to` is the
    rebuild's `arrivals_tail`.
    """
    if rebuilt_to != NO_ENTRY:
        seen = parse_id(rebuilt_to)
        arrivals = [a for a in arrivals if not _first(a) or parse_id(a.entry_id) > seen]
    requeued = [a.id for a in arrivals if a.envelope is None]
    again = []
    if requeued:
        async with deciding or contextlib.nullcontext():
            again = await stores.requests.load_many(requeued)
    # nothing below awaits: the dispatch loop cannot grant in between
    takes = [a for a in arrivals if a.worker is not None]
    failed = desk.adopt(core, takes, now)
    for record in again:
        desk.left_its_worker(core, record.id)
        # the gateway's clock: one running ahead must not bench the worker for its skew
        failed_at = min(record.requeued_at or now, now)
        if record.prev_worker and failed_at + core.failure_cooldown_s > now:
            core.worker_failed(record.prev_worker, failed_at)
    records = [(a.entry_id, a.record()) for a in arrivals if _first(a) and a.id not in core.running]
    entry_of = {a.id: a.entry_id for a in arrivals if a.envelope is None}
    records += [(entry_of.get(r.id, f"request {r.id}"), r) for r in again]
    failed += arrive_each(core, records, now)
    return Taken(len(takes) + len(records), failed)


def _first(arrival: Arrival) -> bool:
    """A first submission: it carries its envelope and was not taken on the fast lane."""
    return arrival.envelope is not None and arrival.worker is None


class ArrivalsIntake:
    """One leader term's reader of `arrivals`: reads a batch after its cursor, applies it with
    `take_in`, then dead-letters what failed. A batch whose read of re-queues raised (Redis
    outage) is kept and applied on the next `step`, before anything new is read; a read whose
    reply was lost left the cursor where it was, so the same entries are read again. `mark`
    records in Redis how far this term has applied (trimming stops there; the next term
    starts there)."""

    def __init__(self, stores: StateStores, rebuilt_to: str, start: str = NO_ENTRY) -> None:
        self._stores = stores
        self._rebuilt_to = rebuilt_to
        self._cursor = start
        self._applied = start
        self._unapplied: list[Arrival] = []

    async def step(
        self, core: SchedulerCore, desk: LendingDesk, deciding: asyncio.Lock
    ) -> Taken | None:
        """Take in the next batch (waiting up to a second for one); None when none came."""
        if not self._unapplied:
            read = await self._stores.arrivals.read_after(self._cursor, count=BATCH, block_ms=1000)
            self._unapplied, self._cursor = read.arrivals, read.last_id
        batch = self._unapplied
        if not batch:
            self._applied = self._cursor  # what was read was dead-lettered, if anything
            return None
        now = time.time()
        taken = await take_in(core, self._stores, desk, batch, now, deciding, self._rebuilt_to)
        self._unapplied = []
        self._applied = self._cursor
        if parse_id(batch[-1].entry_id) > parse_id(self._rebuilt_to):
            self._rebuilt_to = NO_ENTRY  # past the rebuild's tail: nothing more to skip
        await dead_letter_all(self._stores.dead_letters, "arrivals", taken.failed, once=True)
        return taken

    async def mark(self, fencing_token: int) -> bool:
        """Record how far this term has applied; False when its token is stale."""
        if self._applied == NO_ENTRY:
            return True
        return await self._stores.arrivals.mark(self._applied, fencing_token)
