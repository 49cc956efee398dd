"""Leader election: hold a Redis lease, renew it at a third of its TTL, step down when lost.

Guarantees:
- A standby polls at a quarter of the TTL, so after the leader dies its lease expires within one
  TTL and a standby holds it within 1.25 × TTL (the contract is 2 × TTL).
- No lease call waits on Redis longer than half a TTL, so a stalled or partitioned Redis can
  delay neither a step-down nor the next acquisition.
- A holder acts only while its `LeaderTerm` is active, which ends before the lease can expire
  in Redis (see `LeaderTerm`): a deposed leader has stopped acting before another one starts.
- Every tenure gets a new fencing token, also when the same replica takes the lease again.
- Lease calls that timed out in a Redis stall run when Redis resumes; they cannot disturb the
  tenure taken after them (see `LeaderLease`), so a leader does not flap after a stall.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

from control_plane.state.errors import StateUnavailable

log = logging.getLogger(__name__)
T = TypeVar("T")

VALIDITY = 0.8
"""Share of the TTL a holder may act after the start of its last successful renewal."""


class Lease(Protocol):
    token: int | None

    async def acquire(
        self, holder: str, ttl_s: float, now: float, *, fresh: bool = False
    ) -> bool: ...

    async def renew(self, holder: str, ttl_s: float, *, token: int | None = None) -> bool: ...

    async def release(self, holder: str, *, token: int | None = None) -> bool: ...


class LeaderTerm:
    """One tenure of the lease: its fencing token and until when its holder may act.

    Rule: the term is active until it is ended (lease seen lost, a task found the token stale,
    shutdown) and never past `valid_until`, which is `VALIDITY × ttl` after the *start* of the
    last successful renewal, on this process's monotonic clock. Redis keeps the key a full TTL
    after it *executed* that renewal, so an active term implies that no other holder can have
    acquired the lease (up to clock-rate drift, negligible over one TTL).
    """

    def __init__(
        self, token: int, ttl_s: float, started_at: float, clock: Callable[[], float]
    ) -> None:
        self.token = token
        self.ttl_s = ttl_s
        self.valid_until = started_at + VALIDITY * ttl_s
        self.ended = False
        self._clock = clock

    def active(self) -> bool:
        """True while the holder may act as leader."""
        return not self.ended and self._clock() < self.valid_until

    def remaining_s(self) -> float:
        return max(0.0, self.valid_until - self._clock()) if not self.ended else 0.0

    def extend(self, renewal_started_at: float) -> None:
        """A renewal that started at `renewal_started_at` succeeded."""
        self.valid_until = max(self.valid_until, renewal_started_at + VALIDITY * self.ttl_s)

    def end(self) -> None:
        self.ended = True


async def bounded(call: Awaitable[T], limit_s: float) -> T:
    """`await call`, but a Redis that does not answer within `limit_s` is unavailable."""
    try:
        async with asyncio.timeout(limit_s):
            return await call
    except TimeoutError as exc:
        raise StateUnavailable(f"redis did not answer within {limit_s:.2f}s") from exc


async def wait_for_lease(
    lease: Lease, holder: str, ttl_s: float, clock: Callable[[], float] = time.monotonic
) -> LeaderTerm:
    """Return a new term once `holder` holds the lease; survives Redis outages and stalls."""
    while True:
        started = clock()
        try:
            acquired = await bounded(
                lease.acquire(holder, ttl_s, time.time(), fresh=True), ttl_s / 2
            )
            if acquired and lease.token is not None:
                log.info("%s acquired the scheduler lease (token %d)", holder, lease.token)
                return LeaderTerm(lease.token, ttl_s, started, clock)
        except StateUnavailable as exc:
            log.warning("Redis unavailable while waiting for the lease: %s", exc)
        await asyncio.sleep(ttl_s / 4)


async def keep_lease(
    lease: Lease,
    holder: str,
    term: LeaderTerm,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Renew until the term ends, then return: the caller must stop leading.

    The term ends when a renewal is refused (someone else holds the lease, or it expired) or
    when no renewal succeeded in time (Redis down, stalled or partitioned). On a timed-out step
    down the lease is released if Redis answers, so a standby need not wait for the expiry.
    """
    ttl_s = term.ttl_s
    while term.active():
        await asyncio.sleep(min(ttl_s / 3, term.remaining_s()))
        if not term.active():
            break
        started = clock()
        try:
            renewal = lease.renew(holder, ttl_s, token=term.token)
            renewed = await bounded(renewal, max(0.01, term.remaining_s()))
        except StateUnavailable:
            continue  # retried at once if time is left; the loop ends with the term
        if not renewed:
            log.error("%s lost the scheduler lease (token %d)", holder, term.token)
            term.end()
            return
        term.extend(started)
    if not term.ended:
        log.error("%s could not renew its lease in time; stepping down", holder)
    term.end()
    with contextlib.suppress(StateUnavailable):
        await bounded(lease.release(holder, token=term.token), ttl_s / 2)
