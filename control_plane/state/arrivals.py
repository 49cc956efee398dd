"""The scheduler's reader of the `arrivals` stream."""

from __future__ import annotations

from dataclasses import dataclass

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from control_plane.contracts.requests import Envelope, RequestRecord, decode_envelope
from control_plane.state.client import check_client, clamp_block_ms
from control_plane.state.codec import StreamEntry, loads, stream_entries
from control_plane.state.dead_letters import DeadLetters
from control_plane.state.errors import guarded
from control_plane.state.groups import ensure_group, is_missing_group
from control_plane.state.keys import KeySpace


@dataclass(frozen=True, slots=True)
class Arrival:
    """One announced request: its id, and for first submissions its seq and envelope;
    `entry_id` is its id in the `arrivals` stream."""

    id: str
    seq: int
    envelope: Envelope | None
    entry_id: str = ""
    worker: str | None = None
    """Set for a fast-lane take: the request is already granted to this worker."""
    lent_by: int = 0
    """For a take: the fencing token of the leader that lent the slot."""

    def record(self) -> RequestRecord:
        """The queued request this arrival announces (as its hash reads right after submit)."""
        return RequestRecord(
            id=self.id,
            status="queued",
            tenant=self.envelope.job.tenant if self.envelope else "",
            gateway=self.envelope.gateway if self.envelope else "",
            seq=self.seq,
            attempts=1,
            envelope=self.envelope,
        )


class ArrivalsConsumer:
    """Reads ids of newly (re)queued requests through the consumer group `scheduler`.

    Entries are acknowledged as they are read (XREADGROUP NOACK): the `queued` ZSET, not this
    stream, is the durable truth, and a new leader rebuilds from it. A leader therefore calls
    `ensure_group()`, then `RequestStore.takeover_view()`, then loops on `read()`, and skips
    the first submissions at or before the view's `arrivals_tail` (the rebuild holds their
    effect). A group lost with Redis' data is re-created on the next read.
    An entry `read_entries` cannot parse is handed to the dead-letter stream and skipped.
    """

    def __init__(self, redis: Redis, keyspace: KeySpace, *, group: str = "scheduler") -> None:
        self._redis = check_client(redis)
        self._stream = keyspace.arrivals
        self.group = group
        self._dead = DeadLetters(redis, keyspace)

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
        for entry_id, fields in stream_entries(reply):
            try:
                out.append(_arrival(entry_id, fields))
            except (KeyError, ValueError, TypeError) as exc:
                await self._dead_letter((entry_id, fields), f"{type(exc).__name__}: {exc}")
        return out

    async def _dead_letter(self, entry: StreamEntry, reason: str) -> None:
        await self._dead.add(
            consumer=self.group,
            kind="decode",
            reason=reason,
            source="arrivals",
            entry_id=entry[0],
            fields=entry[1],
        )

    async def _read(self, consumer: str, count: int, block_ms: int | None) -> object:
        return await self._redis.xreadgroup(
            self.group,
            consumer,
            {self._stream: ">"},
            count=count,
            block=clamp_block_ms(block_ms),
            noack=True,
        )


def _arrival(entry_id: str, fields: dict[str, str]) -> Arrival:
    """The arrival an entry announces; raises on a malformed one."""
    envelope = decode_envelope(loads(fields["envelope"])) if "envelope" in fields else None
    worker = fields.get("worker") or None
    if worker is not None and envelope is None:
        raise ValueError("a fast-lane take carries its envelope")
    lent_by = int(fields.get("lent_by") or 0)
    return Arrival(fields["id"], int(fields.get("seq") or 0), envelope, entry_id, worker, lent_by)
