"""Ending a request: the completion event, metrics, Redis and the tenant's token budget.

Rule: a flight is finished once; its completion event is handed to the reporter at once (it
buffers through outages) with the request's final status, and the Redis bookkeeping runs off
the response path: marking the request finished and charging its tokens to the tenant's daily
budget. The mark never precedes the completion event: the reporter's flush publishes the
events and marks their requests in one transaction (`Completions`: one round trip, retried
with the events through an outage); where it cannot, the mark is sent once the event is in
Redis (the flights that ended meanwhile together, in one script call; retried with backoff
for `FINISH_RETRY_S`). A gateway that dies in between leaves the request in flight, so the
sweeper releases it and a row is written (a second `complete` after the real one is ignored:
rows are inserted once, and the scheduler no longer runs the request); marking first would
leave a finished request without any event.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine
from typing import Any

from control_plane.contracts.grants import Grant
from control_plane.contracts.requests import Envelope
from control_plane.gateway.deps import GatewayDeps
from control_plane.gateway.flight import Flight, orphan_event, unsent_event
from control_plane.state.errors import StateUnavailable

log = logging.getLogger(__name__)
FINISH_RETRY_S = 60.0
"""How long marking a finished request in Redis is retried (its completion event is buffered by
the reporter regardless)."""


class Finisher:
    """Finishes the flights of one gateway replica; keeps its background tasks alive."""

    def __init__(self, deps: GatewayDeps) -> None:
        self.d = deps
        self._background: set[asyncio.Task[None]] = set()
        self._to_mark: list[tuple[str, str, asyncio.Future[bool]]] = []
        """Finished flights not yet marked in Redis: id, status, its completion event's ack
        (True once the request was marked with its event)."""
        self._marking = False

    async def finish(self, flight: Flight, status: str, error: str | None) -> None:
        """End `flight` with `status` (once; later calls do nothing)."""
        if flight.finished:
            return
        flight.finished = True
        if flight.stats.finished_at is None:
            flight.stats.finished_at = time.time()
        published = self.d.reporter.emit(flight.completion_event(status, error), finish=status)
        self.d.metrics.completed(flight, status)
        # off the response path: the client's answer does not wait for these round trips
        self._mark_later(flight.id, status, published)
        if flight.node.tenant.token_budget is not None:
            self._in_background(self._charge(flight))

    async def settled(self) -> None:
        """Return once the background work started so far (and what it started) is done."""
        while self._background:
            await asyncio.gather(*self._background, return_exceptions=True)

    def _in_background(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _mark_pending(self) -> None:
        """Mark the finished flights in Redis, all those that ended meanwhile in one script
        call (one task at a time per replica)."""
        try:
            while self._to_mark:
                batch, self._to_mark = self._to_mark, []
                await self._mark_finished(batch)
        finally:
            self._marking = False

    async def _mark_finished(self, batch: list[tuple[str, str, asyncio.Future[bool]]]) -> None:
        """Those not marked with their completion events, once the events are in Redis;
        retried with backoff for `FINISH_RETRY_S`: an outage delays it, rarely loses it."""
        items = [(request_id, status) for request_id, status, done in batch if not await done]
        if not items:
            return
        delay, deadline = 0.25, time.monotonic() + FINISH_RETRY_S
        while True:
            try:
                await self.d.requests.finish_many(items, now=time.time())
                return
            except StateUnavailable:
                if time.monotonic() + delay > deadline:
                    log.warning("could not mark %d requests finished in Redis", len(items))
                    return
            except Exception:  # a refusal, not an outage: retrying would meet it again
                log.exception("Redis refused to mark %d requests finished", len(items))
                if len(items) > 1:  # one request's key may be at fault: not the others
                    await self._mark_each(items)
                return
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)

    async def _mark_each(self, items: list[tuple[str, str]]) -> None:
        """Mark one by one what Redis refused to mark together; what is refused alone stays
        in flight (logged), until the sweeper or a fail-over's rebuild."""
        for i, (request_id, status) in enumerate(items):
            try:
                await self.d.requests.finish_many([(request_id, status)], now=time.time())
            except StateUnavailable:
                log.warning("could not mark %d requests finished in Redis", len(items) - i)
                return
            except Exception as exc:
                log.error("Redis refused to mark %s finished: %s", request_id, exc)

    async def _charge(self, flight: Flight) -> None:
        """Count the tokens the request consumed against its tenant's daily budget."""
        stats = flight.stats
        n_in = stats.n_in if stats.n_in is not None else flight.job.n_in
        try:
            await self.d.limits.charge(flight.node.tenant, n_in + stats.n_out, time.time())
        except StateUnavailable:
            log.warning("could not count the tokens of %s in Redis (usage undercounted)", flight.id)

    async def release_orphan(self, grant: Grant, error: str = "client gone before grant") -> None:
        """A grant arrived for a request this gateway no longer serves: release it, marked
        with or after its event like every finish (marked first, the leader's in-flight
        audit could end it before the event arrived, writing a row an orphan never has)."""
        event = orphan_event(grant, time.time(), error)
        published = self.d.reporter.emit(event, finish="aborted")
        self._mark_later(grant.request_id, "aborted", published)

    async def release_unsent(self, grant: Grant, envelope: Envelope, error: str) -> None:
        """A slot was taken (fast lane) or granted (leader) for a submit whose answer never
        came: release it with the request's `complete` event (status `error`, a row to write),
        then the mark."""
        event = unsent_event(grant, envelope, time.time(), error)
        published = self.d.reporter.emit(event, finish="error")
        self._mark_later(grant.request_id, "error", published)

    def _mark_later(self, request_id: str, status: str, published: asyncio.Future[bool]) -> None:
        self._to_mark.append((request_id, status, published))
        if not self._marking:
            self._marking = True
            self._in_background(self._mark_pending())
