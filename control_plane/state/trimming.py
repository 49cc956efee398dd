"""Trimming consumer-group streams to what every group has finished with (bounded memory).

Rule: an entry is removed only when every consumer group of its stream has both delivered it
(its id is at most the group's last-delivered-id) and acknowledged it (it is older than the
oldest entry still pending in the group). A stream is left alone while one of the groups its
readers expect does not exist yet, so a reader that has not started never misses entries.
`XTRIM MINID ~` keeps the floor entry itself and may keep a few more (whole radix nodes only),
so it never removes more than the rule allows.

The scheduler leader runs `StreamTrimmer.trim()` periodically: it always runs while anything
happens (arrivals are read by it alone), exactly one replica does it, and it already owns the
cluster's other periodic chores. Streams without groups are bounded elsewhere: each
`grants:<gateway>` by its single reader's position (`GrantStream.read`), the dead-letter stream
by its MAXLEN.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from control_plane.state.client import check_client
from control_plane.state.errors import guarded
from control_plane.state.keys import KeySpace

StreamId = tuple[int, int]


def parse_id(entry_id: str) -> StreamId:
    """A stream id `ms-seq` as a comparable pair."""
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


def group_floor(last_delivered: str, oldest_pending: str | None) -> StreamId:
    """The oldest id one group may still need: its oldest pending entry, else the last one it
    was delivered (kept, so trimming never depends on computing the id after it)."""
    floor = parse_id(last_delivered)
    if oldest_pending is not None:
        floor = min(floor, parse_id(oldest_pending))
    return floor


class StreamTrimmer:
    """Trims the `arrivals` and `events` streams of one cluster (see the module docstring)."""

    def __init__(
        self, redis: Redis, keyspace: KeySpace, expected: Mapping[str, Sequence[str]]
    ) -> None:
        self._redis = check_client(redis)
        self.expected = {stream: tuple(groups) for stream, groups in expected.items()}

    @classmethod
    def for_cluster(cls, redis: Redis, keyspace: KeySpace) -> StreamTrimmer:
        """Arrivals (read by `scheduler`) and events (read by `scheduler` and `recorder`)."""
        from control_plane.state.events import GROUPS

        return cls(redis, keyspace, {keyspace.arrivals: ("scheduler",), keyspace.events: GROUPS})

    @guarded
    async def trim(self) -> dict[str, int]:
        """Trim every stream once; → entries removed per stream."""
        return {
            stream: await self._trim_one(stream, groups) for stream, groups in self.expected.items()
        }

    @guarded
    async def floor(self, stream: str) -> str | None:
        """The id `stream` may be trimmed up to (kept), or None when it must stay as it is."""
        return await self._floor(stream, self.expected.get(stream, ()))

    async def _trim_one(self, stream: str, groups: Sequence[str]) -> int:
        floor = await self._floor(stream, groups)
        if floor is None:
            return 0
        return int(await self._redis.xtrim(stream, minid=floor, approximate=True))

    async def _floor(self, stream: str, groups: Sequence[str]) -> str | None:
        try:
            infos: list[dict[str, Any]] = await self._redis.xinfo_groups(stream)
        except ResponseError:  # no such stream: nothing to trim
            return None
        names = {str(info["name"]) for info in infos}
        if not infos or not set(groups) <= names:
            return None
        floors = [await self._group_floor(stream, info) for info in infos]
        ms, seq = min(floors)
        return None if (ms, seq) == (0, 0) else f"{ms}-{seq}"

    async def _group_floor(self, stream: str, info: dict[str, Any]) -> StreamId:
        oldest = None
        if int(info.get("pending") or 0) > 0:
            summary = await self._redis.xpending(stream, str(info["name"]))
            oldest = str(summary["min"]) if summary.get("min") else None
        return group_floor(str(info["last-delivered-id"]), oldest)
