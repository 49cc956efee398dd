"""What the leader's slot audit reads: Redis's in-flight set, then the records of the requests
missing from it together with the events stream's tail.

Rule: a gateway's completion events go into the stream before its requests are marked finished
(the `XADD`s and `finish.lua` share one transaction, or the marks wait for the events'
acknowledgement: `Completions`), and a lost replica's releases and a withdrawal publish their
event in the same script (`release_lost.lua`, `withdraw.lua`). `ended` reads the records and the
stream's last id in one MULTI/EXEC, so no write falls between them. Guarantee: every request
`ended` returns with a final status that ended through those paths has its event (`complete`;
`withdrawn` for a withdrawal) at or before `events_tail` — a reader that has applied the stream
up to `events_tail` and still holds such a request as running never got it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from control_plane.contracts.requests import RequestRecord, decode_record
from control_plane.state.client import check_client
from control_plane.state.codec import str_map, text
from control_plane.state.errors import guarded
from control_plane.state.keys import KeySpace

NO_ENTRY = "0-0"
"""The tail of an empty or missing stream: before every id Redis generates."""


@dataclass(frozen=True, slots=True)
class EndedView:
    """The records of some requests (absent: no hash) and the id of the stream's last event,
    read in one transaction."""

    records: dict[str, RequestRecord]
    events_tail: str


class InflightReader:
    """The in-flight ids, the records of missing ones with the events' tail (see the module
    docstring), and how far a consumer group of the events stream has been delivered."""

    def __init__(self, redis: Redis, keyspace: KeySpace) -> None:
        self._redis = check_client(redis)
        self._ks = keyspace

    @guarded
    async def ids(self) -> frozenset[str]:
        """Ids of the granted, unfinished requests."""
        return frozenset(text(i) for i in await self._redis.hkeys(self._ks.inflight))

    @guarded
    async def ended(self, request_ids: Sequence[str]) -> EndedView:
        """The records of `request_ids` and the events' tail, in one transaction."""
        pipe = self._redis.pipeline(transaction=True)
        for request_id in request_ids:
            pipe.hgetall(self._ks.request(request_id))
        pipe.xrevrange(self._ks.events, count=1)
        *hashes, last = await pipe.execute()
        records = {}
        for request_id, fields in zip(request_ids, hashes, strict=True):
            record = decode_record(request_id, str_map(fields))
            if record is not None:
                records[request_id] = record
        return EndedView(records, text(last[0][0]) if last else NO_ENTRY)

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
