"""The `events` stream: progress, completion and withdrawal events for scheduler and recorder.

Typed at this boundary: `publish` takes `control_plane.contracts` events and readers get them
back decoded; an entry that is not a valid event is dead-lettered with the reason, never
returned.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from control_plane.contracts.events import Event, EventError, decode, encode
from control_plane.state.client import MuxRedis, check_client, clamp_block_ms
from control_plane.state.codec import StreamEntry, dumps, loads, stream_entries
from control_plane.state.dead_letters import DeadLetters
from control_plane.state.errors import guarded, is_unavailable
from control_plane.state.groups import ensure_group, is_missing_group
from control_plane.state.keys import KeySpace
from control_plane.state.mux import Arg
from control_plane.state.scripts import Scripts

log = logging.getLogger(__name__)
EventEntry = tuple[str, Event]
GROUPS = ("scheduler", "recorder")
UNACKED_PAUSE = 3
UNACKED_RETRY_S = 10.0
"""With Sentinel, a publish waits (≤ the ack timeout) for a replica; after `UNACKED_PAUSE`
publishes in a row that none acknowledged (the replica is down or far behind), it stops waiting
for `UNACKED_RETRY_S`, then tries again — completions are not slowed while there is none."""


BadEntry = tuple[str, dict[str, str], str]


def _decode(entries: Iterable[StreamEntry]) -> tuple[list[EventEntry], list[BadEntry]]:
    """Split entries into decoded events and (id, fields, reason) of those that are not one."""
    good: list[EventEntry] = []
    bad: list[BadEntry] = []
    for entry_id, fields in entries:
        try:
            event = loads(fields["data"])
        except KeyError:
            bad.append((entry_id, fields, "entry has no 'data' field"))
            continue
        except ValueError as exc:
            bad.append((entry_id, fields, f"'data' is not JSON: {exc}"))
            continue
        if not isinstance(event, dict):
            bad.append((entry_id, fields, f"'data' is not a JSON object: {type(event).__name__}"))
            continue
        try:
            good.append((entry_id, decode(event)))
        except EventError as exc:
            bad.append((entry_id, fields, f"not a valid event: {exc}"))
    return good, bad


class EventStream:
    """Events as JSON (one `data` field per entry), read by one consumer group per reader.

    Delivery is at least once: an entry read by a group stays pending for its consumer until
    `ack`ed. A consumer that restarts under the same name gets its own unacknowledged entries
    back from `pending_for`; entries of a consumer that died under another name are taken
    over with `claim` once idle long enough. Readers must therefore be idempotent.

    Only decoded events are returned: an entry that is not one (not JSON, not an object, or
    not a valid `contracts` event) is handed to the dead-letter stream and acknowledged for
    the reading group, so it cannot block it.

    With `replica_acks` (a replicated Redis: Sentinel), `publish` returns once that many
    replicas hold the events or `ack_timeout_ms` passed (WAIT on the same connection), so a
    fail-over right after a request completed rarely loses its completion (and SQL row).
    """

    def __init__(
        self,
        redis: Redis,
        keyspace: KeySpace,
        *,
        groups: Sequence[str] = GROUPS,
        maxlen: int = 1_000_000,
        replica_acks: int = 0,
        ack_timeout_ms: int = 50,
    ) -> None:
        self._redis = check_client(redis)
        self._mux = redis.mux if isinstance(redis, MuxRedis) else None
        """Publishes go on the pipelined connection unless they must WAIT (on their own)."""
        self._stream = keyspace.events
        self.groups = tuple(groups)
        self._maxlen = maxlen
        self._dead = DeadLetters(redis, keyspace)
        self._scripts = Scripts(redis)
        self._replica_acks = replica_acks
        self._ack_timeout_ms = ack_timeout_ms
        self._unacked = 0
        """Publishes in a row that no replica acknowledged; at `UNACKED_PAUSE` the wait is
        skipped for `UNACKED_RETRY_S` (no replica: don't slow every publish by the timeout)."""
        self._wait_from = 0.0

    @guarded
    async def ensure_groups(self) -> None:
        """Create every consumer group that is missing (each reads from the stream's start)."""
        for group in self.groups:
            await ensure_group(self._redis, self._stream, group)

    @guarded
    async def publish(self, events: Sequence[Event]) -> list[str]:
        """Append `events` in one pipelined round trip; returns their stream ids."""
        if not events:
            return []
        if (commands := self.publish_commands(events)) is not None:
            assert self._mux is not None
            return [str(entry_id) for entry_id in await self._mux.execute_many(commands)]
        pipe = self._redis.pipeline(transaction=False)
        for event in events:
            data = dumps(encode(event))
            pipe.xadd(self._stream, {"data": data}, maxlen=self._maxlen, approximate=True)
        waits = bool(self._replica_acks) and time.monotonic() >= self._wait_from
        if waits:
            pipe.wait(self._replica_acks, self._ack_timeout_ms)
        replies = await pipe.execute()
        if waits:
            self._note_acks(int(replies[-1]))
        return [str(entry_id) for entry_id in replies[: len(events)]]

    def publish_commands(self, events: Sequence[Event]) -> list[tuple[Arg, ...]] | None:
        """The XADD commands `publish` sends on the pipelined connection, for a caller that
        sends them with others (`Completions`); None where publishing takes more than these
        (no multiplexer, or replicas' acknowledgements awaited on their own connection)."""
        if self._mux is None or self._replica_acks:
            return None
        maxlen = ("MAXLEN", "~", self._maxlen)
        return [("XADD", self._stream, *maxlen, "*", "data", dumps(encode(e))) for e in events]

    def _note_acks(self, acked: int) -> None:
        self._unacked = 0 if acked >= self._replica_acks else self._unacked + 1
        if self._unacked >= UNACKED_PAUSE:
            self._unacked = 0
            self._wait_from = time.monotonic() + UNACKED_RETRY_S

    @guarded
    async def read(
        self,
        group: str,
        consumer: str,
        count: int = 256,
        block_ms: int | None = 1000,
        *,
        noack: bool = False,
        ack: Sequence[str] = (),
    ) -> list[EventEntry]:
        """New events for `group`, waiting up to `block_ms` (None: no wait).

        Unless `noack`, each returned entry stays pending until `ack`. Entries named in `ack`
        (processed since the last read) are acknowledged first, in the same round trip: a
        reader that loops needs one round trip per batch, not two. They are acknowledged
        even when the read then fails.
        """
        if ack:
            if noack:
                raise ValueError("ack= acknowledges entries read with acks: not with noack")
            entries = await self._ack_then_read(group, consumer, ack, count, block_ms)
        else:
            entries = await self._group_read(group, consumer, ">", count, block_ms, noack)
        return await self._screen(group, entries, acked=noack)

    async def _ack_then_read(
        self, group: str, consumer: str, ack: Sequence[str], count: int, block_ms: int | None
    ) -> list[StreamEntry]:
        pipe = self._redis.pipeline(transaction=False)
        pipe.xack(self._stream, group, *ack)
        pipe.xreadgroup(
            group, consumer, {self._stream: ">"}, count=count, block=clamp_block_ms(block_ms)
        )
        replies = await pipe.execute(raise_on_error=False)
        for reply in replies:
            if isinstance(reply, ResponseError) and not is_missing_group(reply):
                raise reply
        if isinstance(replies[1], ResponseError):  # the group is gone: recreated by the read
            return await self._group_read(group, consumer, ">", count, block_ms, False)
        return stream_entries(replies[1])

    @guarded
    async def ack(self, group: str, ids: Sequence[str]) -> int:
        """Acknowledge processed entries; returns how many were pending."""
        if not ids:
            return 0
        return int(await self._redis.xack(self._stream, group, *ids))

    @guarded
    async def pending_for(self, group: str, consumer: str, count: int = 256) -> list[EventEntry]:
        """This consumer's delivered but unacknowledged events (re-read after a restart)."""
        return await self._screen(
            group, await self._group_read(group, consumer, "0", count, None, False)
        )

    @guarded
    async def claim(
        self, group: str, consumer: str, *, min_idle_ms: int, count: int = 256
    ) -> list[EventEntry]:
        """Take over up to `count` events pending longer than `min_idle_ms` on other consumers."""
        out: list[StreamEntry] = []
        cursor = "0-0"
        while len(out) < count:
            reply = await self._redis.xautoclaim(
                self._stream, group, consumer, min_idle_ms, start_id=cursor, count=count - len(out)
            )
            cursor = str(reply[0])
            out.extend((str(i), f) for i, f in reply[1] if f is not None)
            if cursor == "0-0":
                break
        return await self._screen(group, out)

    @guarded
    async def forget_consumers(self, group: str, *, idle_ms: int, keep: str) -> list[str]:
        """Delete `group`'s consumers other than `keep` that hold no pending entry and have
        been idle for `idle_ms` (each process reads under a name of its own, so each restart
        left one for good); → their names. Nothing pending is lost: the count is read and
        the consumer deleted in one script. Idle is XINFO CONSUMERS' `idle`: on Redis 7.0 a
        read that returns nothing does not reset it (from 7.2 it does), so a live consumer
        on a quiet stream may go too; its next read that delivers creates it again."""
        try:
            names = await self._scripts.call(
                "consumers_forget", [self._stream], [group, max(0, idle_ms), keep]
            )
        except ResponseError as exc:
            if is_unavailable(exc):
                raise
            # refused (an ACL without XGROUP DELCONSUMER): housekeeping must not stop a reader
            log.warning("forgetting idle consumers of %s refused: %s", group, exc)
            return []
        return [str(name) for name in names]

    @guarded
    async def unconsumed(self) -> dict[str, int]:
        """Per reading group, the events it has not finished with: not yet delivered to it
        (its lag) plus delivered and not acknowledged. Where Redis cannot count the lag
        (entries deleted mid-stream) an undelivered remainder counts as 1, and a group not
        created yet counts every entry: 0 means that group has caught up, exactly."""
        try:
            infos: list[dict[str, Any]] = await self._redis.xinfo_groups(self._stream)
        except ResponseError as exc:
            if "no such key" not in str(exc).lower():
                raise
            return dict.fromkeys(self.groups, 0)  # no stream yet: nothing was published
        found = {str(info["name"]): info for info in infos}
        out: dict[str, int] = {}
        for group in self.groups:
            info = found.get(group)
            if info is None:
                out[group] = int(await self._redis.xlen(self._stream))
                continue
            lag = info.get("lag")
            if lag is None:  # is anything left after what it was last given?
                after = f"({info['last-delivered-id']}"
                lag = len(await self._redis.xrange(self._stream, min=after, count=1) or [])
            out[group] = int(lag) + int(info.get("pending") or 0)
        return out

    @guarded
    async def pending_count(self, group: str) -> int:
        """Number of entries delivered to `group` and not yet acknowledged."""
        summary = await self._redis.xpending(self._stream, group)
        return int(summary["pending"])

    async def set_aside(
        self, group: str, entry_id: str, *, kind: str, reason: str, fields: Any
    ) -> str:
        """Dead-letter one entry `group` gives up on and acknowledge it for `group`, in one
        transaction: a replay (after a crash or a failed `ack`) cannot set it aside twice."""
        return await self._dead.add(
            consumer=group,
            kind=kind,
            reason=reason,
            source="events",
            entry_id=entry_id,
            fields=fields,
            acking=(self._stream, group),
        )

    async def _screen(
        self, group: str, entries: list[StreamEntry], *, acked: bool = False
    ) -> list[EventEntry]:
        """The decoded events; the others are dead-lettered and (unless read with NOACK, so
        `acked`: nothing is pending to acknowledge) acknowledged for `group`."""
        good, bad = _decode(entries)
        for entry_id, fields, reason in bad:
            if acked:
                await self._dead.add(consumer=group, kind="decode", reason=reason,
                                     source="events", entry_id=entry_id, fields=fields)  # fmt: skip
            else:
                await self.set_aside(group, entry_id, kind="decode", reason=reason, fields=fields)
        return good

    async def _group_read(
        self, group: str, consumer: str, start: str, count: int, block_ms: int | None, noack: bool
    ) -> list[StreamEntry]:
        async def once() -> list[StreamEntry]:
            reply = await self._redis.xreadgroup(
                group,
                consumer,
                {self._stream: start},
                count=count,
                block=clamp_block_ms(block_ms),
                noack=noack,
            )
            return stream_entries(reply)

        try:
            return await once()
        except ResponseError as exc:
            if not is_missing_group(exc):
                raise
            await ensure_group(self._redis, self._stream, group)
            return await once()
