"""The scheduler's reader of the `arrivals` stream."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from control_plane.contracts.requests import Envelope, RequestRecord, decode_envelope
from control_plane.state.client import check_client, clamp_block_ms
from control_plane.state.codec import StreamEntry, loads, stream_entries, text
from control_plane.state.dead_letters import DeadLetters
from control_plane.state.errors import guarded
from control_plane.state.groups import ensure_group
from control_plane.state.inflight_view import NO_ENTRY
from control_plane.state.keys import KeySpace
from control_plane.state.scripts import Scripts


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


@dataclass(frozen=True, slots=True)
class ArrivalsBatch:
    """What one read returned: the arrivals, and the id of the last entry read (the next read
    starts after it; bad entries, dead-lettered, count as read)."""

    arrivals: list[Arrival]
    last_id: str


class ArrivalsConsumer:
    """The leader's reader of `arrivals`: by id, after a cursor its term keeps (XREAD).

    A read whose reply was lost (a Redis stall) has moved nothing in Redis, so the same
    entries come back on the next read from the same cursor. The consumer group `scheduler`
    only records how far the leading term has applied (`mark`, fenced by its token): trimming
    stops there and the next term starts reading there. So a leader calls `ensure_group()`,
    `delivered()`, then `RequestStore.takeover_view()`, then reads from the delivered id,
    skipping the first submissions at or before the view's `arrivals_tail` (the rebuild holds
    their effect; a term re-reads at most what its predecessor applied after its last mark).
    The `queued` ZSET, not this stream, is the durable truth. An entry that cannot be parsed
    is dead-lettered (once, however often it is read) and skipped.
    """

    def __init__(self, redis: Redis, keyspace: KeySpace, *, group: str = "scheduler") -> None:
        self._redis = check_client(redis)
        self._ks = keyspace
        self._stream = keyspace.arrivals
        self.group = group
        self._dead = DeadLetters(redis, keyspace)
        self._scripts = Scripts(redis)

    @guarded
    async def ensure_group(self) -> bool:
        """Create the consumer group if missing; True when it was created now."""
        return await ensure_group(self._redis, self._stream, self.group)

    @guarded
    async def delivered(self) -> str:
        """The last entry the group was marked read to (`NO_ENTRY` when it does not exist)."""
        try:
            infos: list[dict[str, Any]] = await self._redis.xinfo_groups(self._stream)
        except ResponseError as exc:
            if "no such key" not in str(exc).lower():
                raise
            return NO_ENTRY
        found = {str(info["name"]): info for info in infos}
        info = found.get(self.group)
        return NO_ENTRY if info is None else text(info["last-delivered-id"])

    @guarded
    async def read_after(
        self, after: str, count: int = 256, block_ms: int | None = 1000
    ) -> ArrivalsBatch:
        """Up to `count` entries after the id `after`, waiting up to `block_ms` (None: no
        wait), with the seq and envelope a submit announced (None for re-queues)."""
        reply = await self._redis.xread(
            {self._stream: after}, count=count, block=clamp_block_ms(block_ms)
        )
        out, last = [], after
        for entry_id, fields in stream_entries(reply):
            last = entry_id
            try:
                out.append(_arrival(entry_id, fields))
            except (KeyError, ValueError, TypeError) as exc:
                await self._dead_letter((entry_id, fields), f"{type(exc).__name__}: {exc}")
        return ArrivalsBatch(out, last)

    @guarded
    async def mark(self, upto: str, fencing_token: int | None) -> bool:
        """Record that the leading term applied every entry up to `upto`; False (nothing
        changed) when `fencing_token` is stale. None marks unfenced (tests, tools)."""
        token = "" if fencing_token is None else str(fencing_token)
        keys = [self._stream, self._ks.leader_epoch]
        return bool(await self._scripts.call("arrivals_mark", keys, [self.group, upto, token]))

    async def _dead_letter(self, entry: StreamEntry, reason: str) -> None:
        await self._dead.add(
            consumer=self.group,
            kind="decode",
            reason=reason,
            source="arrivals",
            entry_id=entry[0],
            fields=entry[1],
            once=True,
        )


def _arrival(entry_id: str, fields: dict[str, str]) -> Arrival:
    """The arrival an entry announces; raises on a malformed one."""
    envelope = decode_envelope(loads(fields["envelope"])) if "envelope" in fields else None
    worker = fields.get("worker") or None
    if worker is not None and envelope is None:
        raise ValueError("a fast-lane take carries its envelope")
    lent_by = int(fields.get("lent_by") or 0)
    return Arrival(fields["id"], int(fields.get("seq") or 0), envelope, entry_id, worker, lent_by)
