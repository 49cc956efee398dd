"""The recorder: `complete` events and `withdrawn` ones (queue timeouts, clients gone while
queued) → request rows (and per-minute rollups) in SQL, and the meta-controller's
`policy_switched` events → audit rows (actor `controller`).

Guarantee: an event is acknowledged only after the transaction holding its row committed, or
after it was set aside in the dead-letter stream; inserts are idempotent on the request id, so
a crash between commit and ack only replays rows that are then ignored. One row may be written
twice: the in-flight audit's (`error` = `LOST_COMPLETION`) is provisional, and a real
completion of its request recorded later — read by a restarted recorder or another one before
the audit's — replaces it, its rollups corrected in the same transaction; whichever comes
first, the request ends with the real row (`RequestRepo.write_many`). SQL work runs in a
worker thread, never on the event loop, so the recorder cannot slow the scheduler it may share
a process with.

No single event can stop accounting. An event that cannot be turned into a row, or whose row
the database refuses, is dead-lettered (with the reason, its id and its fields) and the rest is
written: a refused batch is split until the refused rows stand alone (`isolate.py`), and a row
counts as refused only if it fails alone while the database answers a probe. A database outage
dead-letters nothing: the batch is retried with backoff until it is written. A part of a batch
whose recording raises (a bug, not an outage) is split the same way until the entry that
raises stands alone; that entry is set aside (kind `raised`) after `RAISE_TRIES` tries.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from control_plane.contracts.events import (
    LOST_COMPLETION,
    Audited,
    Complete,
    Event,
    PolicySwitched,
    Withdrawn,
    encode,
)
from control_plane.contracts.knobs import PluginChoice
from control_plane.recorder.isolate import write_isolating
from control_plane.recorder.metrics import RecorderMetrics
from control_plane.recorder.rows import audit_draft, request_row, withdrawal_row
from control_plane.state import StateStores, StateUnavailable
from storage.db import Database
from storage.errors import RowsRejected, StorageUnavailable
from storage.records import RequestRecord
from storage.write_guard import probe_writes, write_audit, write_requests

log = logging.getLogger(__name__)
GROUP = "recorder"
MAX_BACKOFF_S = 10.0
RAISE_TRIES = 3
"""Tries, each alone, before an entry whose recording raises is set aside."""
RAISE_BACKOFF_S = 0.25

Entry = tuple[str, Event]


@dataclass
class Batch:
    """What a batch of events turns into: rows to write, ids of request events that need
    no row, and events that could not be converted (entry id, event, reason)."""

    rows: list[tuple[str, RequestRecord]] = field(default_factory=list)
    no_row: list[str] = field(default_factory=list)
    unconvertible: list[tuple[str, dict[str, Any], str]] = field(default_factory=list)


def to_batch(entries: list[Entry], policy: str | None) -> Batch:
    """Convert each `complete` and `withdrawn` event on its own (pure: no I/O); other events
    need nothing."""
    batch = Batch()
    for entry_id, event in entries:
        if not isinstance(event, Complete | Withdrawn):
            continue
        try:
            if isinstance(event, Complete):
                row = request_row(event, policy)
            else:
                row = withdrawal_row(event, policy)
        except Exception as exc:  # any bad value: this event only
            reason = f"{type(exc).__name__}: {exc}"
            batch.unconvertible.append((entry_id, encode(event), reason))
            continue
        if row is None and isinstance(event, Withdrawn):
            continue  # no row, as before: its hash keeps the retention of an unrecorded one
        if row is None:
            batch.no_row.append(entry_id)
        else:
            batch.rows.append((entry_id, row))
    return batch


class Recorder:
    """Reads the `recorder` consumer group in batches and writes them to SQL.

    Batches are sized by load: after a batch that was not full, the next read waits until
    `min_gap_s` has passed since the previous one began, so under load each SQL transaction
    (and its commit) carries more rows, and a row reaches SQL at most about `min_gap_s` later
    than it would with one transaction per read; a full batch is followed at once."""

    def __init__(
        self,
        stores: StateStores,
        db: Database,
        consumer: str,
        *,
        batch: int = 200,
        interval_s: float = 0.25,
        claim_idle_s: float = 30.0,
        min_gap_s: float = 0.0,
        metrics: RecorderMetrics | None = None,
    ) -> None:
        self.stores = stores
        self.db = db
        self.consumer = consumer
        self.batch = batch
        self.interval_s = interval_s
        self.claim_idle_s = claim_idle_s
        self.min_gap_s = min_gap_s
        self.metrics = metrics or RecorderMetrics()
        self.written = 0
        self.replaced = 0
        self.dead_lettered = 0
        self._policy: tuple[float, str | None] = (0.0, None)

    async def run(self) -> None:
        """Forever: replay own pending entries, claim dead consumers' ones, then read new."""
        backoff = 0.1
        while True:
            try:
                await self._consume()
            except StateUnavailable as exc:
                log.warning("recorder: Redis unavailable (%s); retrying in %.1fs", exc, backoff)
            except Exception:  # a bug must not stop accounting for good: log, back off, resume
                log.exception("recorder: unexpected error; retrying in %.1fs", backoff)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 2.0)

    async def _consume(self) -> None:
        await self.stores.events.ensure_groups()
        await self._drain(await self.stores.events.pending_for(GROUP, self.consumer))
        next_claim = 0.0
        while True:
            if time.monotonic() >= next_claim:
                await self._claim_stale()
                next_claim = time.monotonic() + self.claim_idle_s / 3
            began = time.monotonic()
            entries = await self.stores.events.read(
                GROUP, self.consumer, count=self.batch, block_ms=int(self.interval_s * 1000)
            )
            await self._drain(entries)
            if entries and len(entries) < self.batch:
                await asyncio.sleep(max(0.0, began + self.min_gap_s - time.monotonic()))

    async def _claim_stale(self) -> None:
        """Take over what a dead recorder read but never acknowledged; then forget the
        recorders that hold nothing and have been idle as long (on Redis 7.0: not given an
        entry; each process reads under a name of its own: without this, every restart left
        one in the group for good)."""
        idle_ms = int(self.claim_idle_s * 1000)
        while True:
            entries = await self.stores.events.claim(
                GROUP, self.consumer, min_idle_ms=idle_ms, count=self.batch
            )
            if not entries:
                break
            await self._drain(entries)
        gone = await self.stores.events.forget_consumers(GROUP, idle_ms=idle_ms, keep=self.consumer)
        if gone:
            log.info(
                "recorder: forgot %d idle consumers holding nothing (%s…)", len(gone), gone[:5]
            )

    async def _drain(self, entries: list[Entry]) -> None:
        """Record `entries`. Where that raises (not an outage: `StateUnavailable` goes up and
        the whole is retried), each half is recorded on its own, so one entry that raises
        every time cannot stop the others from being recorded (before, the same batch was
        read again and raised again: nothing was recorded after it, for good)."""
        if not entries:
            return
        try:
            await self._record(entries)
        except StateUnavailable:
            raise
        except Exception as exc:
            if len(entries) == 1:
                await self._retry_alone(entries[0], exc)
                return
            log.warning("recorder: a batch of %d raised (%s); recording each half", len(entries),
                        _reason(exc))  # fmt: skip
            half = len(entries) // 2
            await self._drain(entries[:half])
            await self._drain(entries[half:])

    async def _retry_alone(self, entry: Entry, exc: Exception) -> None:
        """An entry whose recording raised alone: tried again (a fault of the moment passes),
        then set aside with the last reason."""
        for attempt in range(1, RAISE_TRIES):
            await asyncio.sleep(RAISE_BACKOFF_S * attempt)
            try:
                await self._record([entry])
                return
            except StateUnavailable:
                raise
            except Exception as again:
                exc = again
        entry_id, event = entry
        log.error("recorder: recording event %s raised %d times", entry_id, RAISE_TRIES,
                  exc_info=exc)  # fmt: skip
        await self._dead_letter("raised", entry_id, _fields(event), _reason(exc))

    async def _record(self, entries: list[Entry]) -> None:
        batch = to_batch(entries, await self._active_policy())
        await self._write_audit(
            [(eid, e) for eid, e in entries if isinstance(e, PolicySwitched | Audited)]
        )
        refused = await self._write_until_decided(batch.rows)
        events = dict(entries)
        for entry_id, event, reason in batch.unconvertible:
            await self._dead_letter("convert", entry_id, event, reason)
        for entry_id, reason in refused:
            await self._dead_letter("write", entry_id, encode(events[entry_id]), reason)
        refused_ids = {eid for eid, _ in refused}
        done = [eid for eid, _ in batch.rows if eid not in refused_ids] + batch.no_row
        # marked before the acknowledgement: a mark that raises leaves the entries pending,
        # so the entry it raises for is set aside like any other (after it, it was not)
        await self.stores.requests.mark_recorded([events[eid].id for eid in done])
        await self.stores.events.ack(GROUP, [eid for eid, _ in entries])

    async def _write_until_decided(
        self, rows: list[tuple[str, RequestRecord]]
    ) -> list[tuple[str, str]]:
        """Write every row the database accepts; → (entry id, reason) of the refused ones.
        Retries with backoff, without deciding anything, while the database is unavailable."""
        backoff = 0.5
        while True:
            try:
                _, refused = await write_isolating(rows, self._write)
                if refused:  # refused alone, but is it the row or the database?
                    await asyncio.to_thread(probe_writes, self.db)
                return refused
            except Exception as exc:
                log.warning(
                    "recorder: writing %d rows failed (%s); retrying in %.1fs",
                    len(rows),
                    exc,
                    backoff,
                )
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_S)

    async def _write_audit(self, changes: list[tuple[str, PolicySwitched | Audited]]) -> None:
        """Audit rows for the controller's switches and the leader's other changes: retried
        through an outage, and a row the database refuses while it takes others (found by
        writing each alone, `probe_writes`) is dead-lettered on its own."""
        backoff = 0.5
        while changes:
            try:
                await self._audit_isolating(changes)
                return
            except StorageUnavailable as exc:  # replayed: rows written already are skipped
                log.warning("recorder: audit write failed (%s); retrying in %.1fs", exc, backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_S)

    async def _audit_isolating(self, changes: list[tuple[str, PolicySwitched | Audited]]) -> None:
        try:
            await asyncio.to_thread(write_audit, self.db, [audit_draft(e) for _, e in changes])
        except RowsRejected as exc:  # the rows, or a database that refuses all?
            await asyncio.to_thread(probe_writes, self.db)
            if len(changes) > 1:
                for change in changes:
                    await self._audit_isolating([change])
                return
            entry_id, event = changes[0]
            await self._dead_letter("write", entry_id, encode(event), str(exc))

    async def _write(self, rows: list[RequestRecord]) -> int:
        """One transaction; its new rows are counted as it commits (counted at the end of a
        split batch instead, the rows of halves committed before an outage were never counted:
        the retry finds them written). A provisional row replaced by its real completion is
        counted apart (`rows_replaced`): `rows_written` counts each request once."""
        done = await asyncio.to_thread(write_requests, self.db, rows, provisional=LOST_COMPLETION)
        self.written += done.inserted
        self.metrics.rows_written.inc(done.inserted)
        if done.replaced:
            self.replaced += len(done.replaced)
            self.metrics.rows_replaced.inc(len(done.replaced))
            log.info(
                "recorder: %d rows of the in-flight audit replaced by their real completion "
                "(%s…)", len(done.replaced), ", ".join(done.replaced[:5]),
            )  # fmt: skip
        return done.inserted

    async def _dead_letter(
        self, kind: str, entry_id: str, event: dict[str, Any], reason: str
    ) -> None:
        kept = await self.stores.events.set_aside(
            GROUP, entry_id, kind=kind, reason=reason, fields=event
        )
        if not kept:  # set aside already (a repeat of a set-aside whose answer was lost)
            return
        log.error("recorder: event %s dead-lettered (%s): %s", entry_id, kind, reason)
        self.dead_lettered += 1
        self.metrics.dead_letters.labels(GROUP, kind).inc()

    async def _active_policy(self) -> str | None:
        """The policy named in rows of requests never granted; read at most every 2 s. Where
        reading it raises (a bug, not an outage) the last name read stays: a row's label must
        not stop every batch."""
        at, name = self._policy
        if time.monotonic() - at > 2.0:
            try:
                knob = await self.stores.knobs.get("policy")
                live = None if knob else await self.stores.checkpoints.load_live()
            except StateUnavailable:
                raise
            except Exception:
                log.exception("recorder: reading the active policy failed; keeping %r", name)
                self._policy = (time.monotonic(), name)
                return name
            name = knob.name if isinstance(knob, PluginChoice) else None
            name = name or (live.policy.name if live else None) or None
            self._policy = (time.monotonic(), name)
        return name


def _reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _fields(event: Event) -> dict[str, Any]:
    """The event as a dead letter keeps it; its `repr` where even encoding it raises."""
    try:
        return encode(event)
    except Exception as exc:
        return {"repr": repr(event)[:10_000], "encode_error": _reason(exc)}
