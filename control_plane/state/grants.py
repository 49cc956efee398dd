"""The gateways' reader of their own `grants:<gateway-id>` stream."""

from __future__ import annotations

import time

from redis.asyncio import Redis

from control_plane.contracts.grants import Grant
from control_plane.state.client import check_client, clamp_block_ms
from control_plane.state.dead_letters import DeadLetters
from control_plane.state.errors import guarded
from control_plane.state.grant_entries import screen_grants
from control_plane.state.keys import KeySpace


class GrantStream:
    """Plain XREAD of one gateway's grants (one reader per gateway, no consumer group).

    Each entry is `{id, worker_id, worker_url, granted_at, attempt}` as strings, written by the
    grant script. The reader keeps the last stream id it processed and passes it back; it
    starts from `latest_id()` taken BEFORE it accepts its first request, so no grant can fall
    between its start and its first read. A re-queued request gets a second grant entry.

    `read` returns well-formed entries only: a malformed one is moved to the dead-letter stream
    (and deleted here, so it is not read again). Passing `last_id` tells that everything up to
    it was processed: at most every `trim_every_s`, entries before it are trimmed away.
    """

    def __init__(self, redis: Redis, keyspace: KeySpace, *, trim_every_s: float = 5.0) -> None:
        self._redis = check_client(redis)
        self._ks = keyspace
        self._dead = DeadLetters(redis, keyspace)
        self._trim_every_s = trim_every_s
        self._trimmed_at: dict[str, float] = {}

    @guarded
    async def read(
        self, gateway_id: str, last_id: str, block_ms: int | None = 1000, count: int = 512
    ) -> list[tuple[str, Grant]]:
        """Grants (with stream ids) after `last_id`, waiting up to `block_ms` (None: no wait)."""
        await self._trim_read(gateway_id, last_id)
        reply = await self._redis.xread(
            {self._ks.grants(gateway_id): last_id}, count=count, block=clamp_block_ms(block_ms)
        )
        return await screen_grants(self._redis, self._dead, self._ks.grants(gateway_id), reply)

    async def _trim_read(self, gateway_id: str, last_id: str) -> None:
        now = time.monotonic()
        if last_id == "0-0" or now - self._trimmed_at.get(gateway_id, 0.0) < self._trim_every_s:
            return
        self._trimmed_at[gateway_id] = now
        await self._redis.xtrim(self._ks.grants(gateway_id), minid=last_id, approximate=True)

    @guarded
    async def latest_id(self, gateway_id: str) -> str:
        """Id of the newest entry, or "0-0" when the stream is empty or absent."""
        newest = await self._redis.xrevrange(self._ks.grants(gateway_id), count=1)
        return str(newest[0][0]) if newest else "0-0"

    @guarded
    async def trim(self, gateway_id: str, *, maxlen: int = 10_000) -> int:
        """Trim to about `maxlen` entries (the grant script already caps it); returns removed."""
        return int(await self._redis.xtrim(self._ks.grants(gateway_id), maxlen=maxlen))

    @guarded
    async def trim_before(self, gateway_id: str, min_id: str) -> int:
        """Drop entries older than `min_id` (already processed by the gateway)."""
        return int(
            await self._redis.xtrim(self._ks.grants(gateway_id), minid=min_id, approximate=False)
        )

    @guarded
    async def delete(self, gateway_id: str) -> None:
        """Remove the stream of a gateway that shut down."""
        await self._redis.delete(self._ks.grants(gateway_id))
