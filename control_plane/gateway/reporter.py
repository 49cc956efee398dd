"""Progress and completion events from a gateway to the scheduler and the recorder.

Rule: progress is batched — at most one event per request per flush, flushes at most
`interval` seconds apart (docs/architecture.md §2: ≤ 100 ms). Progress carries the *cumulative*
`n_out`, so consumers charge `n_out − already charged`: a late, repeated or reordered event can
never charge twice. A completion event replaces that request's pending progress. If Redis is down
the batch is kept and retried: token charges are delayed, never lost. `emit` returns a future
resolved once its event is in Redis, so a caller can order its own writes after it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import Protocol

from control_plane.contracts.events import Event, Progress
from control_plane.state.errors import StateUnavailable

log = logging.getLogger(__name__)


class EventSink(Protocol):
    async def publish(self, events: Sequence[Event]) -> list[str]: ...


class EventReporter:
    """Batches `progress` deltas and publishes `complete` events for one gateway."""

    def __init__(self, sink: EventSink, interval: float = 0.1, max_buffer: int = 100_000) -> None:
        self._sink = sink
        self._interval = interval
        self._max_buffer = max_buffer
        self._progress: dict[str, Progress] = {}
        self._outbox: list[Event] = []
        self._acks: list[asyncio.Future[None]] = []
        """Futures of the events in `_outbox`, resolved when the flush carrying them succeeds."""
        self._wake = asyncio.Event()

    def progress(self, request_id: str, n_out: int, now: float) -> None:
        """Record that the request has streamed `n_out` tokens in total by `now` (the newest
        report of a request replaces the one still waiting for the flush)."""
        self._progress[request_id] = Progress(request_id, n_out, now)

    def emit(self, event: Event, *, urgent: bool = True) -> asyncio.Future[None]:
        """Queue a non-progress event (complete, worker_failed…); it supersedes pending progress.

        Returns a future resolved once the event is in Redis (after a later flush succeeds).
        """
        self._progress.pop(event.id, None)
        self._outbox.append(event)
        ack: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._acks.append(ack)
        if len(self._outbox) > self._max_buffer:
            log.error(
                "event outbox over %d entries; Redis has been down too long", self._max_buffer
            )
        if urgent:
            self._wake.set()
        return ack

    async def flush(self) -> None:
        batch: list[Event] = [*self._outbox, *self._progress.values()]
        if not batch:
            return
        acks = self._acks
        self._outbox, self._progress, self._acks = [], {}, []
        try:
            await self._sink.publish(batch)
        except StateUnavailable:
            self._outbox = batch + self._outbox
            self._acks = acks + self._acks
            raise
        for ack in acks:
            if not ack.done():
                ack.set_result(None)

    async def run(self) -> None:
        """Flush every `interval` (or at once on urgent events) until cancelled; flush on exit."""
        try:
            while True:
                # not wait_for: on 3.11 it wraps the wait in a task (three loop turns from
                # `emit` to the flush instead of one) and can swallow the cancellation
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._interval):
                        await self._wake.wait()
                self._wake.clear()
                try:
                    await self.flush()
                except StateUnavailable:
                    await asyncio.sleep(min(1.0, self._interval * 5))
        finally:
            try:
                await asyncio.shield(self.flush())
            except (StateUnavailable, asyncio.CancelledError):
                log.warning("could not flush %d events on shutdown", len(self._outbox))
