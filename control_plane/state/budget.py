"""Per-tenant token usage per UTC day, shared by every gateway replica (for `token_budget`)."""

from __future__ import annotations

import math
import time

from redis.asyncio import Redis

from control_plane.state.client import check_client
from control_plane.state.errors import guarded
from control_plane.state.keys import KeySpace

DAY_S = 86_400
USAGE_TTL_S = 2 * DAY_S
"""How long a day's counter lives after its last write: the whole day, plus late readers."""


def utc_day(now: float) -> str:
    """The UTC calendar day of epoch time `now` as `YYYYMMDD`."""
    return time.strftime("%Y%m%d", time.gmtime(now))


def seconds_to_next_day(now: float) -> int:
    """Whole seconds from `now` until the next UTC midnight, at least 1 (a `Retry-After`)."""
    midnight = (math.floor(now / DAY_S) + 1) * DAY_S
    return max(1, math.ceil(midnight - now))


class TokenBudgets:
    """One token counter per tenant per UTC day.

    Rule: `add` counts tokens into the counter of the UTC day of `now` (INCRBY, so concurrent
    gateways never lose an increment) and keeps that counter `ttl_s` seconds after its last
    write; `used` reads it, 0 when absent. Days never mix: a new day starts from zero.
    Outage-type Redis errors leave as `StateUnavailable`.
    """

    def __init__(self, redis: Redis, keyspace: KeySpace, *, ttl_s: int = USAGE_TTL_S) -> None:
        if ttl_s <= 0:
            raise ValueError(f"ttl_s must be > 0: {ttl_s}")
        self._redis = check_client(redis)
        self._ks = keyspace
        self._ttl_s = ttl_s

    def _key(self, tenant: str, now: float) -> str:
        return self._ks.usage_day(tenant, utc_day(now))

    @guarded
    async def add(self, tenant: str, tokens: int, now: float) -> int:
        """Count `tokens` (>= 0) for `tenant` on the UTC day of `now`; the day's new total."""
        if tokens < 0:
            raise ValueError(f"tokens must be >= 0: {tokens}")
        key = self._key(tenant, now)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.incrby(key, tokens)
            pipe.expire(key, self._ttl_s)
            total, _ = await pipe.execute()
        return int(total)

    @guarded
    async def used(self, tenant: str, now: float) -> int:
        """Tokens counted for `tenant` on the UTC day of `now` (0 when none)."""
        raw = await self._redis.get(self._key(tenant, now))
        return int(raw) if raw is not None else 0
