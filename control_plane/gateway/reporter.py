"""Progress and completion events from a gateway to the scheduler and the recorder.

Rule: progress is batched — at most one event per request per flush, flushes at most
`interval` seconds apart (docs/architecture.md §2: ≤ 100 ms). Progress carries the *cumulative*
`n_out`, so consumers charge `n_out − already charged`: a late, repeated or reordered event can
never charge twice. A completion event replaces that request's pending progress. If Redis is down
the batch is kept and retried: token charges are delayed, never lost. `emit` returns a future
resolved once its event is in Redis, so a caller can order its own writes after it; a
completion event can carry its request's final status, marked in Redis with it in the same
round trip where the sink can (`Completions`), after it either way. Redis refusing events
(a full disk, an ACL) is an outage to the reporter: they wait and are retried. A batch that
fails for another reason (an event that cannot be encoded) is sent again one event at a time;
an event that fails on its own is sent once more with its text made encodable, a completion
then as a bare one (id, status, token counts: the scheduler frees its slot), and only then
dropped with an error: one bad event never holds up the others, stops the loop or leaves a
caller waiting on its future. (An event sent twice is taken twice without effect: progress is
cumulative, a completion ends a request once, rows are inserted once.) A flush cancelled
midway returns what it had not sent to the outbox, for the flush on shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from control_plane.contracts.events import Complete, Event, Progress
from control_plane.state import FINAL_STATUSES
from control_plane.state.errors import StateUnavailable

log = logging.getLogger(__name__)
COMPLAIN_EVERY_S = 10.0
T = TypeVar("T")


class EventSink(Protocol):
    """Publishes events, then marks finished requests; False when it marked none of them
    (the caller must), True when they are marked too (`control_plane.state.Completions`)."""

    async def publish(
        self, events: Sequence[Event], finished: Sequence[tuple[str, str]], *, now: float
    ) -> bool: ...


class EventReporter:
    """Batches `progress` deltas and publishes `complete` events for one gateway."""

    def __init__(
        self,
        sink: EventSink,
        interval: float = 0.1,
        max_buffer: int = 100_000,
        on_dropped: Callable[[Event], None] | None = None,
    ) -> None:
        self._sink = sink
        self._on_dropped = on_dropped
        self._interval = interval
        self._max_buffer = max_buffer
        self._progress: dict[str, Progress] = {}
        self._outbox: list[Event] = []
        self._acks: list[tuple[Event, bool, asyncio.Future[bool]]] = []
        """Each event of `_outbox` (whether it carries a final status) and its future, resolved
        when the flush carrying it succeeds: True where the request was marked finished with
        it."""
        self._finished: dict[str, str] = {}
        """Final status of the requests whose completion events are in `_outbox`."""
        self._wake = asyncio.Event()
        self.dropped = 0
        """Events that could not be sent in any form (`_fallbacks`), and were dropped."""
        self._complained_at = -COMPLAIN_EVERY_S

    def progress(self, request_id: str, n_out: int, now: float) -> None:
        """Record that the request has streamed `n_out` tokens in total by `now` (the newest
        report of a request replaces the one still waiting for the flush)."""
        self._progress[request_id] = Progress(request_id, n_out, now)

    def emit(
        self, event: Event, *, urgent: bool = True, finish: str | None = None
    ) -> asyncio.Future[bool]:
        """Queue a non-progress event (complete, worker_failed…); it supersedes pending progress.

        Returns a future resolved once the event is in Redis (after a later flush succeeds),
        or, for an event that could not be sent in any form, once it was dropped: True when
        its request was then also marked finished with status `finish`, in the same
        transaction; False when the caller must mark it.
        """
        if finish is not None and finish not in FINAL_STATUSES:  # here, not in a later flush
            raise ValueError(f"final status must be one of {sorted(FINAL_STATUSES)}: {finish!r}")
        self._progress.pop(event.id, None)
        self._outbox.append(event)
        if finish is not None:
            self._finished[event.id] = finish
        ack: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._acks.append((event, finish is not None, ack))
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
        except (StateUnavailable, asyncio.CancelledError):
            self._put_back(batch, acks, finished)
            raise
        except Exception:
            log.exception(
                "a batch of %d events could not be sent; sending them one by one", len(batch)
            )
            await self._publish_each(batch, acks, finished)
            return
        for _, final, ack in acks:
            if not ack.done():
                ack.set_result(marked and final)

    def _put_back(
        self,
        batch: list[Event],
        acks: list[tuple[Event, bool, asyncio.Future[bool]]],
        finished: dict[str, str],
    ) -> None:
        """Return events not yet in Redis to the front of the outbox (an outage, a cancel)."""
        self._outbox = batch + self._outbox
        self._acks = acks + self._acks
        self._finished = finished | self._finished

    async def _publish_each(
        self,
        batch: list[Event],
        acks: list[tuple[Event, bool, asyncio.Future[bool]]],
        finished: dict[str, str],
    ) -> None:
        """Each event of a failed batch on its own, unmarked (the callers mark); an outage or
        a cancel midway returns the rest to the outbox."""
        futures: dict[int, list[asyncio.Future[bool]]] = {}
        for sent, _, ack in acks:
            futures.setdefault(id(sent), []).append(ack)
        for i, event in enumerate(batch):
            try:
                await self._publish_alone(event)
            except (StateUnavailable, asyncio.CancelledError):
                rest = batch[i:]
                left = {id(e) for e in rest}
                mine = {e.id for e in rest}
                self._put_back(
                    rest,
                    [a for a in acks if id(a[0]) in left],
                    {k: v for k, v in finished.items() if k in mine},
                )
                raise
            for ack in futures.get(id(event), ()):
                if not ack.done():
                    ack.set_result(False)

    async def _publish_alone(self, event: Event) -> None:
        """Publish one event, else its fallbacks (`_fallbacks`) in turn; when none can be
        sent, drop it with an error."""
        error: Exception | None = None
        for fallback in _fallbacks(event):
            try:  # making the fallback may fail too (an event no copy can be made of)
                await self._sink.publish([fallback()], [], now=time.time())
                return
            except StateUnavailable:
                raise
            except Exception as exc:
                error = exc
        self.dropped += 1
        if self._on_dropped is not None:
            try:
                self._on_dropped(event)
            except Exception:
                log.exception("counting a dropped event failed")
        log.error(
            "dropped %s event of request %s: it could not be sent (%s: %s)",
            type(event).__name__, event.id, type(error).__name__, error,
        )  # fmt: skip

    def _complain(self, exc: StateUnavailable) -> None:
        """A warning, at most every `COMPLAIN_EVERY_S`, while events wait: an outage shows in
        the gateway's readiness, but Redis refusing only writes (a full disk) does not."""
        now = time.monotonic()
        if now - self._complained_at >= COMPLAIN_EVERY_S:
            self._complained_at = now
            log.warning("%d events wait for Redis: %s", len(self._outbox), exc)

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
                except StateUnavailable as exc:
                    self._complain(exc)
                    await asyncio.sleep(min(1.0, self._interval * 5))
                except Exception:  # a bug must not end the gateway's accounting for good
                    log.exception("the event reporter's flush failed; it goes on")
                    await asyncio.sleep(min(1.0, self._interval * 5))
        finally:
            try:
                await asyncio.shield(self.flush())
            except (StateUnavailable, asyncio.CancelledError):
                log.warning("could not flush %d events on shutdown", len(self._outbox))


def encodable(value: T) -> T:
    """`value` with every text in it (dataclass fields, nested) encodable as UTF-8: characters
    that are not (lone surrogates) written as backslash escapes; anything else unchanged."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")  # type: ignore[return-value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: encodable(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return dataclasses.replace(value, **fields)
    return value


def _fallbacks(event: Event) -> list[Callable[[], Event]]:
    """How to make `event`, then a copy with its text made encodable (a lone surrogate
    cannot be sent as UTF-8), then, for a completion, a bare one: enough for the scheduler
    to free the request's slot and charge its tokens and, with its sender and arrival, for
    the recorder to write its row; the rest is left to the gateway's log. Last, a bare one
    without its sender (the recorder dead-letters it: no row can be made)."""
    attempts: list[Callable[[], Event]] = [lambda: event, lambda: encodable(event)]
    if isinstance(event, Complete):
        complete = event
        attempts.append(lambda: _bare(complete, encodable(complete)))
        attempts.append(lambda: _bare(complete, None))
    return attempts


def _bare(event: Complete, kept: Complete | None) -> Complete:
    log.error("completion of %s could not be sent whole; sending it bare: %r", event.id, event)
    return Complete(
        id=event.id, status=event.status, finished=event.finished, n_in=event.n_in,
        n_out=event.n_out, error="its completion event could not be sent: see the gateway log",
        orphan=event.orphan, sender=kept.sender if kept else None,
        arrival=kept.arrival if kept else None, worker=kept.worker if kept else None,
        dispatched=kept.dispatched if kept else None,
        first_token=kept.first_token if kept else None,
        attempts=kept.attempts if kept else 0, images=kept.images if kept else None,
        policy=kept.policy if kept else None,
    )  # fmt: skip
