"""Leader election: hold a Redis lease, renew it at a third of its TTL, step down when lost.

Guarantee: a standby polls at a quarter of the TTL, so after the leader dies its lease expires
within one TTL and a standby holds it within 1.25 × TTL (the contract is 2 × TTL).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Protocol

from control_plane.state.errors import StateUnavailable

log = logging.getLogger(__name__)


class Lease(Protocol):
    async def acquire(self, holder: str, ttl_s: float, now: float) -> bool: ...

    async def renew(self, holder: str, ttl_s: float) -> bool: ...

    async def release(self, holder: str) -> bool: ...


async def wait_for_lease(lease: Lease, holder: str, ttl_s: float) -> None:
    """Return once `holder` holds the lease; survives Redis outages."""
    while True:
        try:
            if await lease.acquire(holder, ttl_s, time.time()):
                log.info("%s acquired the scheduler lease", holder)
                return
        except StateUnavailable:
            log.warning("Redis unavailable while waiting for the lease")
        await asyncio.sleep(ttl_s / 4)


async def keep_lease(lease: Lease, holder: str, ttl_s: float) -> None:
    """Renew until the lease is lost (returns) — the caller must then stop leading."""
    misses_allowed = time.monotonic() + ttl_s * 0.8
    while True:
        await asyncio.sleep(ttl_s / 3)
        try:
            if not await lease.renew(holder, ttl_s):
                log.error("%s lost the scheduler lease", holder)
                return
            misses_allowed = time.monotonic() + ttl_s * 0.8
        except StateUnavailable:
            if time.monotonic() > misses_allowed:
                log.error("%s could not renew its lease in time; stepping down", holder)
                return
