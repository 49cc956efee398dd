"""Freeing the worker slots of requests that ended in Redis without their completion reaching
the leader (run by the scheduler leader only, after each gateway sweep).

Rule: a request the leader's core holds as running is ended by the audit when it has been
absent from Redis's in-flight set on every pass for `confirm_s`, and the leader has applied the
events stream up to the tail read together with the first of those passes (`InflightView`):
its completion, had one been sent, was in the stream by then and would have been applied. Its
request hash must say it ended (a final status): a request re-queued after a worker failure
(`queued`, its arrival still on the way) or granted again is left alone, and so is one whose
hash is gone — an ended hash is kept an hour unless recorded, so a missing one means Redis
lost data, and its worker may well still be serving it.

For each such request the audit publishes one `complete` event — the status from the request
hash, the output tokens the leader charged, `error` =
`LOST_COMPLETION` — which the leader's events loop applies like any other (the slot is freed,
the fast lane's desk and the metrics see it) and the recorder writes as the request's row.

What it catches: a completion the gateway could not send in any form (dropped, counted in
`arbiter_gateway_events_dropped_total`), one the leader could not apply (dead-lettered), and
an orphan grant a gateway released (marked before its event is sent: freed a little early,
which is right, as nothing is served on it). Without the audit each held its worker slot
until the next fail-over's rebuild.

Guarantees: a request in Redis's in-flight set, or whose completion is in the stream, is never
ended by the audit; none is ended twice (after publishing, the request waits for the leader
to apply the audit's own event before it can be due again, by which time it has ended).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from control_plane.contracts.events import Complete, Sender
from control_plane.contracts.requests import RequestRecord
from control_plane.core.scheduler_core import Running, SchedulerCore
from control_plane.state import StateStores
from control_plane.state.inflight_view import InflightView
from control_plane.state.trimming import StreamId, parse_id

log = logging.getLogger(__name__)

LOST_COMPLETION: Final = "completion lost: slot freed by the leader's in-flight audit"
NOT_ENDED: Final = frozenset({"queued", "granted"})


@dataclass(frozen=True, slots=True)
class Sighting:
    """When a running request was first seen absent from `inflight`, and the stream's tail
    read with it (or the audit's own event, once published)."""

    since: float
    tail: StreamId


class SlotAudit:
    """One audit pass per `run` call; see the module docstring for the rule."""

    def __init__(self, stores: StateStores, *, confirm_s: float) -> None:
        self.stores = stores
        self.confirm_s = confirm_s
        self._seen: dict[str, Sighting] = {}

    async def run(self, core: SchedulerCore, applied: str, now: float) -> list[Complete]:
        """One pass: `applied` is the last events-stream id the leader applied. → the events
        published (each is applied when the leader reads it back)."""
        view = await self.stores.inflight.read()
        due = self.observe(core.running, view, parse_id(applied), now)
        if not due:
            return []
        records = {r.id: r for r in await self.stores.requests.load_many(due)}
        events = [  # a completion applied while the records loaded has freed its slot
            event
            for rid in due
            if (run := core.running.get(rid)) is not None
            and (event := ending(run, records.get(rid), now)) is not None
        ]
        ids = await self.stores.events.publish(events)
        for event, entry_id in zip(events, ids, strict=True):
            self._seen[event.id] = Sighting(now, parse_id(entry_id))
            log.warning(
                "request %s ended (%s in Redis; its completion never reached the leader)",
                event.id,
                event.status,
            )
        return events

    def observe(
        self, running: Iterable[str], view: InflightView, applied: StreamId, now: float
    ) -> list[str]:
        """Record this pass's sightings (dropping requests seen in flight or no longer
        running); → the ids now due for an ending."""
        tail = parse_id(view.events_tail)
        absent = [rid for rid in running if rid not in view.ids]
        self._seen = {rid: self._seen.get(rid) or Sighting(now, tail) for rid in absent}
        return [
            rid
            for rid, seen in self._seen.items()
            if now - seen.since >= self.confirm_s and applied >= seen.tail
        ]


def ending(run: Running, record: RequestRecord | None, now: float) -> Complete | None:
    """The `complete` event that ends `run`, or None unless Redis says it ended."""
    if record is None or record.status in NOT_ENDED:
        return None
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
