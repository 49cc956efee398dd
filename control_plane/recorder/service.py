"""The recorder: `complete` events → request rows (and per-minute rollups) in SQL.

Guarantee: an event is acknowledged only after the transaction holding its row committed;
inserts are idempotent on the request id, so a crash between commit and ack only replays rows
that are then ignored. SQL work runs in a worker thread, never on the event loop, so the
recorder cannot slow the scheduler it may share a process with.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from control_plane.recorder.rows import request_row
from control_plane.state import StateStores, StateUnavailable
from storage.db import Database
from storage.records import RequestRecord

log = logging.getLogger(__name__)
GROUP = "recorder"


class Recorder:
    """Reads the `recorder` consumer group in batches and writes them to SQL."""

    def __init__(
        self,
        stores: StateStores,
        db: Database,
        consumer: str,
        *,
        batch: int = 200,
        interval_s: float = 0.25,
        claim_idle_s: float = 30.0,
    ) -> None:
        self.stores = stores
        self.db = db
        self.consumer = consumer
        self.batch = batch
        self.interval_s = interval_s
        self.claim_idle_s = claim_idle_s
        self.written = 0
        self._policy: tuple[float, str | None] = (0.0, None)

    async def run(self) -> None:
        """Forever: replay own pending entries, claim dead consumers' ones, then read new."""
        backoff = 0.1
        while True:
            try:
                await self.stores.events.ensure_groups()
                await self._drain(await self.stores.events.pending_for(GROUP, self.consumer))
                next_claim = 0.0
                while True:
                    if time.monotonic() >= next_claim:
                        await self._claim_stale()
                        next_claim = time.monotonic() + self.claim_idle_s / 3
                    entries = await self.stores.events.read(
                        GROUP, self.consumer, count=self.batch, block_ms=int(self.interval_s * 1000)
                    )
                    await self._drain(entries)
                    backoff = 0.1
            except StateUnavailable as exc:
                log.warning("recorder: Redis unavailable (%s); retrying in %.1fs", exc, backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)

    async def _claim_stale(self) -> None:
        """Take over what a dead recorder read but never acknowledged."""
        while True:
            entries = await self.stores.events.claim(
                GROUP, self.consumer, min_idle_ms=int(self.claim_idle_s * 1000), count=self.batch
            )
            if not entries:
                return
            await self._drain(entries)

    async def _drain(self, entries: list[tuple[str, dict[str, Any]]]) -> None:
        if not entries:
            return
        policy = await self._active_policy()
        rows = [
            row
            for _, event in entries
            if event.get("type") == "complete" and (row := request_row(event, policy))
        ]
        while True:
            try:
                self.written += await asyncio.to_thread(self._write, rows)
                break
            except Exception:
                log.exception("recorder: writing %d rows failed; retrying", len(rows))
                await asyncio.sleep(1.0)
        await self.stores.events.ack(GROUP, [eid for eid, _ in entries])

    def _write(self, rows: list[RequestRecord]) -> int:
        if not rows:
            return 0
        with self.db.repos() as repos:
            return repos.requests.insert_many(rows)

    async def _active_policy(self) -> str | None:
        at, name = self._policy
        if time.monotonic() - at > 2.0:
            knob = await self.stores.knobs.get("policy")
            live = None if knob else await self.stores.checkpoints.load("live")
            name = (knob or {}).get("name") or ((live or {}).get("policy") or {}).get("name")
            self._policy = (time.monotonic(), name)
        return name
