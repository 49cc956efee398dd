"""Redis's in-flight set and the events stream's tail, read together (the leader's slot audit).

Rule: both are read in one MULTI/EXEC, so no write falls between them. A gateway's completion
events go into the stream before its requests leave `inflight` (the `XADD`s and `finish.lua`
share one transaction, or the marks wait for the events' acknowledgement: `Completions`), and
a lost replica's releases publish their event in the same script (`release_lost.lua`).
Guarantee: every request absent from `ids` that ended through those paths has its `complete`
event at or before `events_tail` in the stream — a reader that has applied the stream up to
`events_tail` and still holds such a request as running never got its completion.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from control_plane.state.client import check_client
from control_plane.state.codec import text
from control_plane.state.errors import guarded
from control_plane.state.keys import KeySpace

NO_ENTRY = "0-0"
"""The tail of an empty or missing stream: before every id Redis generates."""


@dataclass(frozen=True, slots=True)
class InflightView:
    """Ids of the granted, unfinished requests, and the id of the stream's last event."""

    ids: frozenset[str]
    events_tail: str


class InflightReader:
    """Reads an `InflightView` in one transaction (see the module docstring), and how far a
    consumer group of the events stream has been delivered."""

    def __init__(self, redis: Redis, keyspace: KeySpace) -> None:
        self._redis = check_client(redis)
        self._ks = keyspace

    @guarded
    async def read(self) -> InflightView:
        pipe = self._redis.pipeline(transaction=True)
        pipe.hkeys(self._ks.inflight)
        pipe.xrevrange(self._ks.events, count=1)
        ids, last = await pipe.execute()
        tail = text(last[0][0]) if last else NO_ENTRY
        return InflightView(frozenset(text(i) for i in ids), tail)

    @guarded
    async def delivered(self, group: str) -> str:
        """The last events-stream id delivered to `group` (`NO_ENTRY` when neither the
        stream nor the group exists yet)."""
        try:
            infos: list[dict[str, Any]] = await self._redis.xinfo_groups(self._ks.events)
        except ResponseError as exc:
            if "no such key" not in str(exc).lower():
                raise
            return NO_ENTRY
        found = {str(info["name"]): info for info in infos}
        info = found.get(group)
        return NO_ENTRY if info is None else text(info["last-delivered-id"])
