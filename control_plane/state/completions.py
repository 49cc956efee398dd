"""A gateway's events and the marks of its finished requests, in one round trip."""

from __future__ import annotations

from collections.abc import Sequence

from redis.asyncio import Redis
from redis.exceptions import NoScriptError

from control_plane.contracts.events import Event
from control_plane.state.client import MuxRedis
from control_plane.state.errors import guarded
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
    A script Redis no longer knows (NOSCRIPT after a restart) is loaded and the marks repeated
    at once, after the events (published by the transaction, or, where Redis refused it
    whole, on their own first).
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
        does; True once both are in Redis, False when only the events are (see the class)."""
        xadds = self._events.publish_commands(events) if finished else None
        if self._mux is None or xadds is None:
            await self._events.publish(events)
            return not finished
        marks = self._requests.finish_commands(finished, now=now)
        try:
            replies = await self._mux.execute_many([("MULTI",), *xadds, *marks, ("EXEC",)])
        except NoScriptError:  # refused while queued (EXECABORT): nothing ran
            await self._events.publish(events)
            await self._requests.finish_many(finished, now=now)
            return True
        done: list[object] = replies[-1]
        if errors := [r for r in done[: len(xadds)] if isinstance(r, Exception)]:
            raise errors[0]
        if any(isinstance(r, NoScriptError) for r in done[len(xadds) :]):
            await self._requests.finish_many(finished, now=now)
        elif errors := [r for r in done[len(xadds) :] if isinstance(r, Exception)]:
            raise errors[0]
        return True
