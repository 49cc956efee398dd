"""Reading requests: their statuses and records, the queue and what is in flight."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Final

from redis.asyncio import Redis

from control_plane.contracts.requests import RequestRecord, decode_record
from control_plane.state.codec import str_map, text
from control_plane.state.errors import guarded
from control_plane.state.inflight_view import NO_ENTRY
from control_plane.state.keys import KeySpace

LOAD_CHUNK: Final = 500
"""Requests read (or marked) per pipeline."""


@dataclass(frozen=True, slots=True)
class TakeoverView:
    """What a new leader rebuilds from, read in one transaction: the in-flight map (request id
    → worker), the queued requests' records in arrival order, and the id of the `arrivals`
    stream's last entry (`NO_ENTRY` for an empty stream). No request is in both; every arrival
    at or before `arrivals_tail` announced a request whose state then is what the view shows
    (queued, in flight, or gone from both)."""

    inflight: dict[str, str]
    queued: list[RequestRecord]
    arrivals_tail: str


class RequestReads:
    """The read side of `RequestStore`; it writes nothing. Each record is read whole (one
    `HGETALL`), so it is never half of two states; reads of many requests are pipelined in
    chunks of `LOAD_CHUNK`."""

    _redis: Redis
    _ks: KeySpace

    @guarded
    async def owned_by(self, gateway_ids: Collection[str]) -> list[RequestRecord]:
        """Records of the queued and granted requests whose gateway is one of `gateway_ids`.

        The queued and in-flight ids are read in one transaction, so a request moving from one
        to the other meanwhile is still seen; queued ones come first, in arrival order.
        """
        owners = set(gateway_ids)
        if not owners:
            return []
        pipe = self._redis.pipeline(transaction=True)
        pipe.zrange(self._ks.queued, 0, -1)
        pipe.hkeys(self._ks.inflight)
        queued, inflight = await pipe.execute()
        ids = list(dict.fromkeys(text(i) for i in [*queued, *inflight]))
        mine = [i for i, gw in zip(ids, await self._gateways_of(ids), strict=True) if gw in owners]
        records = await self.load_many(mine)
        return [r for r in records if r.status in ("queued", "granted")]

    async def _gateways_of(self, request_ids: list[str]) -> list[str | None]:
        out: list[str | None] = []
        for start in range(0, len(request_ids), LOAD_CHUNK):
            pipe = self._redis.pipeline(transaction=False)
            for request_id in request_ids[start : start + LOAD_CHUNK]:
                pipe.hget(self._ks.request(request_id), "gateway")
            out += [None if gw is None else text(gw) for gw in await pipe.execute()]
        return out

    @guarded
    async def status(self, request_id: str) -> str | None:
        """The request's status, or None when Redis does not know it (expired, or lost with
        the data a restarted Redis could not recover)."""
        value = await self._redis.hget(self._ks.request(request_id), "status")
        return None if value is None else text(value)

    @guarded
    async def released(self, request_id: str) -> bool:
        """Whether the leader released the request as its gateway's (`release_lost.lua`) within
        `RELEASED_TTL_S`, its ended hash expired or not."""
        return bool(await self._redis.exists(self._ks.released(request_id)))

    @guarded
    async def get(self, request_id: str) -> RequestRecord | None:
        """The request's record (see `decode_record`), or None when unknown or expired."""
        return decode_record(
            request_id, str_map(await self._redis.hgetall(self._ks.request(request_id)))
        )

    @guarded
    async def load_many(self, request_ids: list[str]) -> list[RequestRecord]:
        """Records of `request_ids` in the given order (pipelined); unknown ids are skipped."""
        records: list[RequestRecord] = []
        for start in range(0, len(request_ids), LOAD_CHUNK):
            pipe = self._redis.pipeline(transaction=False)
            chunk = request_ids[start : start + LOAD_CHUNK]
            for request_id in chunk:
                pipe.hgetall(self._ks.request(request_id))
            for request_id, fields in zip(chunk, await pipe.execute(), strict=True):
                record = decode_record(request_id, str_map(fields))
                if record is not None:
                    records.append(record)
        return records

    @guarded
    async def queued_ids(self) -> list[str]:
        """Ids of queued requests in arrival order."""
        return [str(i) for i in await self._redis.zrange(self._ks.queued, 0, -1)]

    @guarded
    async def load_queued(self) -> list[RequestRecord]:
        """Records of every queued request in arrival order (the admin's live view)."""
        return await self._still_queued(await self.queued_ids())

    @guarded
    async def takeover_view(self) -> TakeoverView:
        """The in-flight map, the queue and the arrivals' tail (see `TakeoverView`).

        A request withdrawn between the transaction and its record's read is left out.
        """
        pipe = self._redis.pipeline(transaction=True)
        pipe.hgetall(self._ks.inflight)
        pipe.zrange(self._ks.queued, 0, -1)
        pipe.xrevrange(self._ks.arrivals, count=1)
        inflight, ids, last = await pipe.execute()
        queued = await self._still_queued([text(i) for i in ids])
        tail = text(last[0][0]) if last else NO_ENTRY
        return TakeoverView(str_map(inflight), queued, tail)

    async def _still_queued(self, request_ids: list[str]) -> list[RequestRecord]:
        return [r for r in await self.load_many(request_ids) if r.status == "queued"]

    @guarded
    async def depth(self) -> int:
        """Number of queued requests, all tenants together."""
        return int(await self._redis.zcard(self._ks.queued))

    @guarded
    async def inflight(self) -> dict[str, str]:
        """Granted, unfinished requests: request id → worker id."""
        return str_map(await self._redis.hgetall(self._ks.inflight))

    @guarded
    async def tenant_depths(self) -> dict[str, int]:
        """Queued requests per tenant (tenants with none are absent)."""
        raw = str_map(await self._redis.hgetall(self._ks.tenant_queued))
        return {tenant: int(count) for tenant, count in raw.items()}
