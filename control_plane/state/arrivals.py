"""The scheduler's reader of the `arrivals` stream."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from control_plane.state.client import check_client, clamp_block_ms
from control_plane.state.codec import loads, stream_entries
from control_plane.state.errors import guarded
from control_plane.state.groups import ensure_group, is_missing_group
from control_plane.state.keys import KeySpace


@dataclass(frozen=True, slots=True)
class Arrival:
    """One announced request: its id, and for first submissions its seq and envelope."""

    id: str
    seq: int
    envelope: dict[str, Any] | None


class ArrivalsConsumer:
    """Reads ids of newly (re)queued requests through the consumer group `scheduler`.

    Entries are acknowledged as they are read (XREADGROUP NOACK): the `queued` ZSET, not this
    stream, is the durable truth, and a new leader rebuilds from it. A leader therefore calls
    `ensure_group()`, then `RequestStore.load_queued()`, then loops on `read()`, and ignores ids
    it already knows. A group lost with Redis' data is re-created on the next read.
    """

    def __init__(self, redis: Redis, keyspace: KeySpace, *, group: str = "scheduler") -> None:
        self._redis = check_client(redis)
        self._stream = keyspace.arrivals
        self.group = group

    @guarded
    async def ensure_group(self) -> bool:
        """Create the consumer group if missing; True when it was created now."""
        return await ensure_group(self._redis, self._stream, self.group)

    @guarded
    async def read(self, consumer: str, count: int = 256, block_ms: int | None = 1000) -> list[str]:
        """Up to `count` new request ids, waiting up to `block_ms` (None: no wait)."""
        try:
            reply = await self._read(consumer, count, block_ms)
        except ResponseError as exc:
            if not is_missing_group(exc):
                raise
            await self.ensure_group()
            reply = await self._read(consumer, count, block_ms)
        return [fields["id"] for _, fields in stream_entries(reply) if "id" in fields]

    @guarded
    async def read_entries(
        self, consumer: str, count: int = 256, block_ms: int | None = 1000
    ) -> list[Arrival]:
        """Like `read`, with the seq and envelope a submit announced (None for re-queues)."""
        try:
            reply = await self._read(consumer, count, block_ms)
        except ResponseError as exc:
            if not is_missing_group(exc):
                raise
            await self.ensure_group()
            reply = await self._read(consumer, count, block_ms)
        out = []
        for _, fields in stream_entries(reply):
            if "id" not in fields:
                continue
            envelope = loads(fields["envelope"]) if "envelope" in fields else None
            out.append(Arrival(fields["id"], int(fields.get("seq") or 0), envelope))
        return out

    async def _read(self, consumer: str, count: int, block_ms: int | None) -> object:
        return await self._redis.xreadgroup(
            self.group,
            consumer,
            {self._stream: ">"},
            count=count,
            block=clamp_block_ms(block_ms),
            noack=True,
        )
