"""The scheduler leader lease with a fencing token."""

from __future__ import annotations

import itertools
import logging
import uuid
from typing import Any

from redis.asyncio import Redis

from control_plane.state.client import check_client
from control_plane.state.codec import time_arg
from control_plane.state.errors import guarded
from control_plane.state.keys import KeySpace
from control_plane.state.scripts import Scripts
from control_plane.state.sentinel import named_elsewhere

log = logging.getLogger(__name__)


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

    With `replica_acks` (a replicated Redis: Sentinel), a new tenure is confirmed only after
    WAIT saw that many replicas take the token (up to `ack_timeout_ms`), so a fail-over to such
    a replica cannot hand out that token again: the fencing token never goes backwards. A
    tenure whose token no replica acknowledged in time is still granted (a lost replica must
    not stop scheduling) and counted in `unconfirmed` — unless Sentinel names another primary
    than the node that handed it out: that node was deposed by a fail-over while it was cut
    off or stalled (its replica promoted, so none acknowledges), and the promoted one hands
    out the same token to the next leader; such a tenure is refused (before, the deposed
    holder led on with a token the new leader also held, and its fenced writes passed there).
    The Sentinels are asked for at most `ttl_s / 4` (a tenure whose ask found no answer in
    that time leads, with the warning).

    A call that timed out here during a Redis stall still runs when Redis resumes. Such stale
    calls cannot disturb a later tenure: every acquire carries this object's incarnation and a
    rising sequence number (a new tenure is refused to a call older than the incarnation's
    latest acquisition), and `renew` / `release` given a tenure's token act on that tenure only.
    """

    def __init__(
        self,
        redis: Redis,
        keyspace: KeySpace,
        *,
        replica_acks: int = 0,
        ack_timeout_ms: int = 100,
    ) -> None:
        self._redis = check_client(redis)
        self._ks = keyspace
        self._scripts = Scripts(redis)
        self.replica_acks = replica_acks
        self.ack_timeout_ms = ack_timeout_ms
        self.unconfirmed = 0
        """New tenures whose token fewer than `replica_acks` replicas acknowledged in time."""
        self.token: int | None = None
        """Fencing token of this object's latest successful acquire (None before or after)."""
        self.incarnation = uuid.uuid4().hex
        self._attempts = itertools.count(1)

    @guarded
    async def acquire(self, holder: str, ttl_s: float, now: float, *, fresh: bool = False) -> bool:
        """Take the lease if free, or extend it if `holder` has it; sets `self.token`.

        With `fresh`, a lease `holder` still has is taken anew with a new fencing token: a
        holder that stepped down starts every tenure with a token its old tenure never had.
        """
        ks = self._ks
        keys = [ks.leader, ks.leader_epoch, ks.leader_info]
        args: list[str | int | float] = [
            holder,
            _ttl_ms(ttl_s),
            time_arg(now),
            "1" if fresh else "0",
            self.incarnation,
            next(self._attempts),
        ]
        if not self.replica_acks:
            token = int(await self._scripts.call("lease_acquire", keys, args))
        else:
            token = await self._acquire_replicated(keys, args, ttl_s)
        self.token = token or None
        return token > 0

    async def _acquire_replicated(
        self, keys: list[str], args: list[str | int | float], ttl_s: float
    ) -> int:
        # WAIT covers the writes of its own connection only: acquire and wait on one
        async with self._redis.client() as conn:
            token = int(await Scripts(conn).call("lease_acquire", keys, args))
            if token > 0 and token != self.token:
                acked = int(await conn.wait(self.replica_acks, self.ack_timeout_ms))
                # within TTL / 4: the scheduler cuts a whole acquire at TTL / 2
                if acked < self.replica_acks and await named_elsewhere(conn, ttl_s / 4):
                    log.warning(
                        "fencing token %d was taken on a primary Sentinel no longer names "
                        "(deposed by a fail-over): the tenure is not taken",
                        token,
                    )
                    return 0
                if acked < self.replica_acks:
                    self.unconfirmed += 1
                    log.warning(
                        "fencing token %d reached %d of %d replicas within %d ms: a fail-over "
                        "now could hand it out again",
                        token,
                        acked,
                        self.replica_acks,
                        self.ack_timeout_ms,
                    )
        return token

    @guarded
    async def renew(self, holder: str, ttl_s: float, *, token: int | None = None) -> bool:
        """Extend the lease only while `holder` has it (in the tenure `token`, when given);
        False means leadership is lost."""
        keys = [self._ks.leader, self._ks.leader_epoch]
        args: list[str | int] = [holder, _ttl_ms(ttl_s), "" if token is None else token]
        renewed = bool(await self._scripts.call("lease_renew", keys, args))
        if not renewed:
            self.token = None
        return renewed

    @guarded
    async def release(self, holder: str, *, token: int | None = None) -> bool:
        """Give the lease up if `holder` has it (in the tenure `token`, when given), so a
        standby takes over at once."""
        self.token = None
        keys = [self._ks.leader, self._ks.leader_epoch]
        args: list[str | int] = [holder, "" if token is None else token]
        return bool(await self._scripts.call("lease_release", keys, args))

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
