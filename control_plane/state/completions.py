"""A gateway's events and the marks of its finished requests, in one round trip."""

from __future__ import annotations

from collections.abc import Sequence

from redis.asyncio import Redis
from redis.exceptions import NoScriptError, ResponseError

from control_plane.contracts.events import Event
from control_plane.state.client import MuxRedis
from control_plane.state.errors import StateUnavailable, guarded
from control_plane.state.events import EventStream
from control_plane.state.request_store import RequestStore


class Completions:
    """Publishes events and marks finished requests (`finish`) in one transaction.

    Rule: a mark never precedes its completion event. On the multiplexed connection the events'
    XADDs and the `finish` scripts go as one MULTI/EXEC in one write: Redis runs them in that
    order with nothing in between, or (a refused command, a connection lost before EXEC) runs
    none of them. Where publishing takes more than XADDs (no multiplexer; replicas'
    acknowledgements awaited on their own connection) only the events are published and
    `publish` answers False: the caller marks afterwards, as it would without this class.
    Marks that fail once their events are in (a script Redis forgot after a restart, an error
    inside the script) are sent again on their own; if that fails too `publish` answers False,
    so the events are never published twice and a bad mark cannot hold up the events.
    """

    def __init__(self, redis: Redis, events: EventStream, requests: RequestStore) -> None:
        self._mux = redis.mux if isinstance(redis, MuxRedis) else None
        self._events = events
        self._requests = requests

    @guarded
    async def publish(
        self, events: Sequence[Event], finished: Sequence[tuple[str, str]], *, now: float
    ) -> bool:
        """Publish `events`, then mark each `(request id, status)` of `finished` as `finish`
        does; True once both are in Redis, False when only the events are (see the class).

        Redis refusing the events (`MISCONF` after a failed save, an ACL's `NOPERM`, the
        stream's key of another type) raises `StateUnavailable`: such a refusal meets every
        event until an operator acts, so the events wait as through an outage rather than
        being dropped one by one. An event that cannot be encoded raises as it is."""
        try:
            return await self._publish(events, finished, now)
        except ResponseError as exc:
            raise StateUnavailable(f"redis refused the events: {exc}") from exc

    async def _publish(
        self, events: Sequence[Event], finished: Sequence[tuple[str, str]], now: float
    ) -> bool:
        xadds = self._events.publish_commands(events) if finished else None
        if self._mux is None or xadds is None:
            await self._events.publish(events)
            return not finished
        marks = self._requests.finish_commands(finished, now=now)
        try:
            replies = await self._mux.execute_many([("MULTI",), *xadds, *marks, ("EXEC",)])
        except NoScriptError:  # a server that refuses it while queuing (EXECABORT): nothing
            # ran. Redis 7 queues it and answers NOSCRIPT inside EXEC's reply (below).
            await self._events.publish(events)
            return await self._mark_alone(finished, now)
        done: list[object] = replies[-1]
        if errors := [r for r in done[: len(xadds)] if isinstance(r, Exception)]:
            raise errors[0]
        if any(isinstance(r, Exception) for r in done[len(xadds) :]):
            return await self._mark_alone(finished, now)
        return True

    async def _mark_alone(self, finished: Sequence[tuple[str, str]], now: float) -> bool:
        """The events are in Redis, the marks are not: mark on their own (`finish_many` loads
        a script Redis forgot). False if that fails too: the caller marks, and meets the error
        itself, while the events, already published, are not sent again."""
        try:
            await self._requests.finish_many(finished, now=now)
        except (StateUnavailable, ResponseError):
            return False
        return True
