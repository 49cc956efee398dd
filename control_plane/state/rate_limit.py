"""Per-tenant request rate limiting (token bucket in Redis, shared by every gateway)."""

from __future__ import annotations

from redis.asyncio import Redis

from control_plane.state.client import check_client
from control_plane.state.codec import time_arg
from control_plane.state.errors import guarded
from control_plane.state.keys import KeySpace
from control_plane.state.scripts import Scripts


class RateLimiter:
    """A token bucket per tenant: `rate` requests per second on average, bursts up to `burst`.

    One script call decides and takes the tokens atomically, so gateway replicas share one
    budget. A refused call takes nothing and says how long until it would pass.
    """

    def __init__(self, redis: Redis, keyspace: KeySpace) -> None:
        self._redis = check_client(redis)
        self._ks = keyspace
        self._scripts = Scripts(redis)

    @guarded
    async def allow(
        self, tenant: str, rate: float, burst: float, now: float, *, cost: float = 1.0
    ) -> tuple[bool, float]:
        """(allowed, retry_after_s): retry_after_s is 0 when allowed."""
        if rate <= 0 or cost <= 0 or burst < cost:
            raise ValueError(f"need rate > 0, cost > 0, burst >= cost: {rate=} {burst=} {cost=}")
        allowed, retry_after = await self._scripts.call(
            "token_bucket",
            [self._ks.rate(tenant)],
            [repr(rate), repr(burst), time_arg(now), repr(cost)],
        )
        return bool(allowed), float(retry_after)
