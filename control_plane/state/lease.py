"""The scheduler leader lease with a fencing token."""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis

from control_plane.state.client import check_client
from control_plane.state.codec import time_arg
from control_plane.state.errors import guarded
from control_plane.state.keys import KeySpace
from control_plane.state.scripts import Scripts


def _ttl_ms(ttl_s: float) -> int:
    if ttl_s <= 0:
        raise ValueError(f"lease ttl must be positive, got {ttl_s}")
    return max(1, round(ttl_s * 1000))


class LeaderLease:
    """At most one holder at a time: a Redis key with an expiry, set only if free.

    The holder renews it well within `ttl_s`; if it stops (crash, partition) the key expires
    and a standby's `acquire` succeeds within one TTL of the last renewal. Every acquisition
    increments an epoch, the fencing token: a deposed leader still holds its old token, so
    its writes can be refused (`Checkpoint.save(..., fencing_token=...)`) or detected
    (`is_current`). Expiry is measured by Redis, so the holders' clocks do not matter.
    """

    def __init__(self, redis: Redis, keyspace: KeySpace) -> None:
        self._redis = check_client(redis)
        self._ks = keyspace
        self._scripts = Scripts(redis)
        self.token: int | None = None
        """Fencing token of this object's latest successful acquire (None before or after)."""

    @guarded
    async def acquire(self, holder: str, ttl_s: float, now: float, *, fresh: bool = False) -> bool:
        """Take the lease if free, or extend it if `holder` has it; sets `self.token`.

        With `fresh`, a lease `holder` still has is taken anew with a new fencing token: a
        holder that stepped down starts every tenure with a token its old tenure never had.
        """
        ks = self._ks
        token = int(
            await self._scripts.call(
                "lease_acquire",
                [ks.leader, ks.leader_epoch, ks.leader_info],
                [holder, _ttl_ms(ttl_s), time_arg(now), "1" if fresh else "0"],
            )
        )
        self.token = token or None
        return token > 0

    @guarded
    async def renew(self, holder: str, ttl_s: float) -> bool:
        """Extend the lease only while `holder` has it; False means leadership is lost."""
        renewed = bool(
            await self._scripts.call("lease_renew", [self._ks.leader], [holder, _ttl_ms(ttl_s)])
        )
        if not renewed:
            self.token = None
        return renewed

    @guarded
    async def release(self, holder: str) -> bool:
        """Give the lease up if `holder` has it, so a standby takes over at once."""
        self.token = None
        return bool(await self._scripts.call("lease_release", [self._ks.leader], [holder]))

    @guarded
    async def holder(self) -> str | None:
        """Current holder id, or None when the lease is free."""
        value = await self._redis.get(self._ks.leader)
        return None if value is None else str(value)

    @guarded
    async def current_token(self) -> int:
        """The latest fencing token handed out (0 before the first acquisition)."""
        return int(await self._redis.get(self._ks.leader_epoch) or 0)

    @guarded
    async def is_current(self, token: int) -> bool:
        """True while `token` is the latest fencing token (its holder was not deposed)."""
        return await self.current_token() == token

    @guarded
    async def info(self) -> dict[str, Any]:
        """Holder, token and acquisition time of the latest acquisition, plus who holds now."""
        raw = await self._redis.hgetall(self._ks.leader_info)
        out: dict[str, Any] = {"holder": await self.holder()}
        if raw:
            out.update(
                last_holder=raw["holder"],
                token=int(raw["token"]),
                acquired_at=float(raw["acquired_at"]),
            )
        return out
