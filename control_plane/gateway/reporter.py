"""Progress and completion events from a gateway to the scheduler and the recorder.

Rule: progress is batched — at most one event per request per flush, flushes at most
`interval` seconds apart (docs/architecture.md §2: ≤ 100 ms). Progress carries the *cumulative*
`n_out`, so consumers charge `n_out − already charged`: a late, repeated or reordered event can
never charge twice. A completion event replaces that request's pending progress. If Redis is down
the batch is kept and retried: token charges are delayed, never lost. `emit` returns a future
resolved once its event is in Redis, so a caller can order its own writes after it; a
completion event can carry its request's final status, marked in Redis with it in the same
round trip where the sink can (`Completions`), after it either way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from typing import Protocol

from control_plane.contracts.events import Event, Progress
from control_plane.state import FINAL_STATUSES
from control_plane.state.errors import StateUnavailable

log = logging.getLogger(__name__)


class EventSink(Protocol):
    """Publishes events, then marks finished requests; False when it marked none of them
    (the caller must), True when they are marked too (`control_plane.state.Completions`)."""

    async def publish(
        self, events: Sequence[Event], finished: Sequence[tuple[str, str]], *, now: float
    ) -> bool: ...


class EventReporter:
    """Batches `progress` deltas and publishes `complete` events for one gateway."""

    def __init__(self, sink: EventSink, interval: float = 0.1, max_buffer: int = 100_000) -> None:
        self._sink = sink
        self._interval = interval
        self._max_buffer = max_buffer
        self._progress: dict[str, Progress] = {}
        self._outbox: list[Event] = []
        self._acks: list[tuple[str | None, asyncio.Future[bool]]] = []
        """Future of each event in `_outbox` (with its request's id where it carries a final
        status), resolved when the flush carrying it succeeds: True where the request was
        marked finished with it."""
        self._finished: dict[str, str] = {}
        """Final status of the requests whose completion events are in `_outbox`."""
        self._wake = asyncio.Event()

    def progress(self, request_id: str, n_out: int, now: float) -> None:
        """Record that the request has streamed `n_out` tokens in total by `now` (the newest
        report of a request replaces the one still waiting for the flush)."""
        self._progress[request_id] = Progress(request_id, n_out, now)

    def emit(
        self, event: Event, *, urgent: bool = True, finish: str | None = None
    ) -> asyncio.Future[bool]:
        """Queue a non-progress event (complete, worker_failed…); it supersedes pending progress.

        Returns a future resolved once the event is in Redis (after a later flush succeeds):
        True when its request was then also marked finished with status `finish`, in the same
        transaction; False when the caller must mark it.
        """
        if finish is not None and finish not in FINAL_STATUSES:  # here, not in a later flush
            raise ValueError(f"final status must be one of {sorted(FINAL_STATUSES)}: {finish!r}")
        self._progress.pop(event.id, None)
        self._outbox.append(event)
        if finish is not None:
            self._finished[event.id] = finish
        ack: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._acks.append((event.id if finish is not None else None, ack))
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
        acks, finished = self._acks, self._finished
        self._outbox, self._progress, self._acks, self._finished = [], {}, [], {}
        try:
            marked = await self._sink.publish(batch, list(finished.items()), now=time.time())
        except StateUnavailable:
            self._outbox = batch + self._outbox
            self._acks = acks + self._acks
            self._finished = finished | self._finished
            raise
        for request_id, ack in acks:
            if not ack.done():
                ack.set_result(marked and request_id is not None)

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
