"""The dead-letter stream: stream entries a consumer could not parse or apply, kept for people.

A consumer that meets such an entry (a poison pill) hands it here with the reason, then
acknowledges or skips it, so one bad entry never stops the entries after it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Final

from redis.asyncio import Redis

from control_plane.state.client import check_client
from control_plane.state.codec import dumps, loads, str_map
from control_plane.state.errors import guarded
from control_plane.state.keys import KeySpace
from control_plane.state.scripts import Scripts

MAXLEN: Final = 10_000
_REASON_CHARS: Final = 2_000


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """One dead-lettered entry.

    `consumer`: who gave up on it (`recorder`, `scheduler`, `gateway`); `kind`: a short,
    low-cardinality class of failure (`decode`, `convert`, `write`, `raised`, `apply`, `grant`);
    `reason`: the error in words; `source`: the stream it came from and `entry_id` its id
    there; `fields`: the entry's original fields (decoded when they were JSON).
    """

    id: str
    at: float
    consumer: str
    kind: str
    reason: str
    source: str
    entry_id: str
    fields: Any


class DeadLetters:
    """Appends and lists dead letters, newest first.

    Bounded: the stream keeps about the newest `maxlen` entries (XADD MAXLEN ~), and a counter
    per `consumer:kind` (never trimmed) says how many there ever were. The append and the count
    are one script, so the count never misses an entry that was kept; with `acking`, the
    consumer's acknowledgement of the entry is in the same script and comes first, so an entry
    replayed after a crash, a failed acknowledgement, or a set-aside that timed out and ran late
    is never set aside twice.
    """

    def __init__(self, redis: Redis, keyspace: KeySpace, *, maxlen: int = MAXLEN) -> None:
        self._redis = check_client(redis)
        self._ks = keyspace
        self._scripts = Scripts(redis)
        self.maxlen = maxlen

    @guarded
    async def add(
        self,
        *,
        consumer: str,
        kind: str,
        reason: str,
        source: str,
        entry_id: str,
        fields: Any,
        now: float | None = None,
        acking: tuple[str, str] | None = None,
        once: bool = False,
    ) -> str:
        """Keep one entry that `consumer` gave up on; returns its dead-letter id. `acking`:
        (stream key, group) whose acknowledgement of `entry_id` commits with it; the entry is
        kept only if it was still pending for that group ("" returned otherwise). `once`
        (without `acking`): kept only the first time `source`'s `entry_id` is added within a
        day, for streams read by id that may be read again."""
        entry: dict[Any, Any] = {
            "at": repr(time.time() if now is None else now),
            "consumer": consumer,
            "kind": kind,
            "reason": reason[:_REASON_CHARS],
            "source": source,
            "entry_id": entry_id,
            "fields": _json_text(fields),
        }
        keys = [self._ks.dead_letters, self._ks.dead_letter_counts]
        group = ""
        if acking is not None:
            keys.append(acking[0])
            group = acking[1]
        elif once:
            keys.append(self._ks.dead_letter_once(source, entry_id))
        args: list[str | int | float] = [self.maxlen, f"{consumer}:{kind}", group, entry_id]
        for name, value in entry.items():
            args += [name, value]
        new_id = await self._scripts.call("dead_letter_add", keys, args)
        return new_id.decode() if isinstance(new_id, bytes) else str(new_id)

    @guarded
    async def list(self, *, limit: int = 100, before: str | None = None) -> list[DeadLetter]:
        """Up to `limit` entries, newest first, older than the id `before` when given."""
        newest = "+" if before is None else f"({before}"
        entries = await self._redis.xrevrange(self._ks.dead_letters, newest, "-", count=limit)
        return [_letter(str(entry_id), str_map(fields or {})) for entry_id, fields in entries or []]

    @guarded
    async def counts(self) -> dict[str, int]:
        """How many entries were ever dead-lettered, per `consumer:kind` (a field that holds
        no count — written by hand — is left out)."""
        raw = str_map(await self._redis.hgetall(self._ks.dead_letter_counts))
        return {name: int(n) for name, n in raw.items() if n.isascii() and n.isdigit()}

    @guarded
    async def length(self) -> int:
        """How many entries the stream keeps now."""
        return int(await self._redis.xlen(self._ks.dead_letters))


def _json_text(fields: Any) -> str:
    try:
        return dumps(fields)
    except TypeError:  # e.g. an integer beyond 64 bits: keep its text rather than lose it
        return dumps(repr(fields))


def _letter(entry_id: str, fields: dict[str, str]) -> DeadLetter:
    try:
        original = loads(fields.get("fields", "null"))
    except ValueError:
        original = fields.get("fields")
    return DeadLetter(
        id=entry_id,
        at=float(fields.get("at") or 0.0),
        consumer=fields.get("consumer", ""),
        kind=fields.get("kind", ""),
        reason=fields.get("reason", ""),
        source=fields.get("source", ""),
        entry_id=fields.get("entry_id", ""),
        fields=original,
    )
