"""Freeing the worker slots of requests that ended in Redis without their completion reaching
the leader (run by the scheduler leader only, after each gateway sweep).

Rule: each pass reads Redis's in-flight set; for the requests the leader's core runs that are
missing from it, it reads their records and the events stream's tail in one transaction
(`EndedView`). One whose record says it ended (a final status) had its completion, if one was
sent, in the stream at or before that tail — events go in before the mark. Once a later pass
finds it still missing, the leader has applied the stream up to that tail, and its core still
runs the same request (the same decision), that completion is not coming: the audit ends it.
A request missing because its grant is still being written, or re-queued after a worker
failure (its arrival still on the way), is `queued` in Redis and left alone; one withdrawn
while its grant was being written reads `withdrawn`, but its refused grant takes it out of the
core before the next pass; one whose hash is gone is left alone too — an ended hash is kept
an hour unless recorded, so a missing one most likely means Redis lost data, and its worker
may still be serving it.

For each such request the audit publishes one `complete` event — the status from the request
hash, the output tokens the leader charged, `error` = `LOST_COMPLETION` — which the leader's
events loop applies like any other (the slot is freed, the fast lane's desk and the metrics
see it) and the recorder writes as the request's provisional row: should the real completion
be recorded after it (one a predecessor read before the mark is in the stream, earlier; a
restarted recorder, or another one, may record it later), it replaces that row and corrects
the rollups (`RequestRepo.write_many`); recorded first, it stays and the audit's is ignored.

What it catches: a completion the gateway could not send in any form (dropped, counted in
`arbiter_gateway_events_dropped_total`), one the leader could not apply (dead-lettered), and
one a predecessor read before the request's mark went in (its rebuild found the request
in flight). Without the audit each held its worker slot until the next fail-over's rebuild.

Guarantees: a request in Redis's in-flight set, not ended there, or whose completion is in the
stream is never ended by the audit, so no worker is over-committed by it; none is ended twice
(after publishing, a request waits for the leader to apply the audit's own event, by which
time it has ended). A pass that fails for any reason but an outage is logged and skipped: the
audit is a safety net, it never ends a leader's term.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from control_plane.contracts.events import LOST_COMPLETION, Complete, Sender
from control_plane.contracts.requests import RequestRecord
from control_plane.core.scheduler_core import Running, SchedulerCore
from control_plane.state import StateStores, StateUnavailable
from control_plane.state.trimming import StreamId, parse_id

log = logging.getLogger(__name__)

__all__ = ["LOST_COMPLETION", "NOT_ENDED", "Sighting", "SlotAudit", "ending", "newest"]

NOT_ENDED: Final = frozenset({"queued", "granted"})


@dataclass(frozen=True, slots=True)
class Sighting:
    """A running request Redis says ended: the core's entry for it (a new decision is a new
    entry), its record, and the stream's tail read with it (or the audit's own event's id)."""

    run: Running
    record: RequestRecord
    tail: StreamId
    sighted: int
    """The pass that made it: only a later one may end the request."""


class SlotAudit:
    """One audit pass per `run` call; see the module docstring for the rule."""

    def __init__(self, stores: StateStores) -> None:
        self.stores = stores
        self._seen: dict[str, Sighting] = {}
        self._passes = 0

    async def run(self, core: SchedulerCore, applied: str, now: float) -> list[Complete]:
        """One pass: `applied` is the last events-stream id the leader applied. → the events
        published (each is applied when the leader reads it back)."""
        try:
            return await self._pass(core, parse_id(applied), now)
        except StateUnavailable:
            raise
        except Exception:  # a refusal or a bug: the next pass tries again
            log.exception("in-flight audit pass failed")
            return []

    async def _pass(self, core: SchedulerCore, applied: StreamId, now: float) -> list[Complete]:
        self._passes += 1
        inflight = await self.stores.inflight.ids()
        missing = [rid for rid in core.running if rid not in inflight]
        await self.sight(core, missing)
        due = [
            seen
            for rid, seen in self._seen.items()
            if seen.sighted < self._passes
            and applied >= seen.tail
            and core.running.get(rid) is seen.run
        ]
        if not due:
            return []
        events = [ending(seen.run, seen.record, now) for seen in due]
        ids = await self.stores.events.publish(events)
        for seen, event, entry_id in zip(due, events, ids, strict=True):
            self._seen[event.id] = Sighting(seen.run, seen.record, parse_id(entry_id), self._passes)
            log.warning(
                "request %s ended (%s in Redis; its completion never reached the leader)",
                event.id,
                event.status,
            )
        return events

    async def sight(self, core: SchedulerCore, missing: list[str]) -> None:
        """Keep the sightings still missing under the same decision; read the new ones'
        records with the stream's tail and keep those Redis says ended."""
        gone = set(missing)
        self._seen = {
            rid: seen
            for rid, seen in self._seen.items()
            if rid in gone and core.running.get(rid) is seen.run
        }
        new = [rid for rid in missing if rid not in self._seen]
        if not new:
            return
        view = await self.stores.inflight.ended(new)
        tail = parse_id(view.events_tail)
        for rid in new:
            record, run = view.records.get(rid), core.running.get(rid)
            if record is not None and run is not None and record.status not in NOT_ENDED:
                self._seen[rid] = Sighting(run, record, tail, self._passes)


def ending(run: Running, record: RequestRecord, now: float) -> Complete:
    """The `complete` event that ends `run`, whose record says it ended."""
    job = run.job
    return Complete(
        id=job.id,
        status=record.status,
        error=LOST_COMPLETION,
        sender=Sender.of(job),
        arrival=job.arrival,
        dispatched=record.granted_at,
        finished=record.finished_at or now,
        n_in=job.n_in,
        n_out=job.n_out,
        worker=run.worker,
        attempts=max(0, record.attempts - 1),
    )


def newest(current: str, entry_ids: Iterable[str]) -> str:
    """The latest of `current` and `entry_ids` (stream ids compare as numbers, not text)."""
    return max((current, *entry_ids), key=parse_id)
