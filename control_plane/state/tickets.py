"""Tickets: an admin change bounded in time, and what it did when its reply was lost.

Rule: the caller sets a ticket key (`PENDING`, expiring `within_ms` later on Redis's clock)
just before the script call that carries it; the script changes something only while the
ticket is `PENDING`, and then stores its own result in it (`ran:<result>`, kept
`SPENT_TTL_MS`). Guarantees: a call Redis runs after the ticket expired changes nothing (a
caller that gave up never finds its change applied later); and a caller whose reply was lost
asks the ticket (`outcome`) and learns for certain whether the change ran and what it
returned, or that it never will — unless Redis cannot be asked either, when it still cannot
tell.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable

from redis.asyncio import Redis

from control_plane.state.errors import StateUnavailable, is_unavailable

log = logging.getLogger(__name__)

PENDING = "1"
TOO_LATE = -2
"""What a ticketed script returns when its ticket is no longer pending."""
SPENT_TTL_MS = 60_000
"""How long a spent ticket keeps its result (the scripts' literal `PX 60000`): far longer than
any caller waits for a reply."""
_RAN = "ran:"


def ticket_key(prefix: str) -> str:
    """A fresh ticket key under `prefix` (`<knobs>:ticket:<uuid>`)."""
    return f"{prefix}:ticket:{uuid.uuid4().hex}"


async def issue(redis: Redis, key: str, within_ms: int) -> None:
    """Set the ticket: the change it carries may run only within `within_ms` from now."""
    await redis.set(key, PENDING, px=max(1, within_ms))


async def outcome(redis: Redis, key: str, within_ms: int) -> int | None:
    """What the change carrying ticket `key` returned, asked after its reply was lost; None
    when it did not run and no longer can (the ticket expired unspent). Waits out a ticket
    still pending (the call may not have reached Redis yet), at most `within_ms` and a
    little; `StateUnavailable` when it is pending still, or when Redis cannot be asked."""
    for _ in range(2 + within_ms // 50):
        value = await redis.get(key)
        if value is None:
            return None
        text = value.decode() if isinstance(value, bytes) else str(value)
        if text.startswith(_RAN):
            return int(text[len(_RAN) :])
        left_ms = await redis.pttl(key)
        await asyncio.sleep(min(max(left_ms, 1), 50) / 1000)
    # still pending past its expiry as this process counts it: Redis's clock says otherwise,
    # and the change may yet run
    raise StateUnavailable(f"ticket {key} is still pending: whether its change ran is unknown")


async def ticketed(redis: Redis, call: Awaitable[object], key: str, within_ms: int) -> int:
    """The result of a script `call` carrying ticket `key` (`TOO_LATE`: it ran past the
    ticket). When its reply is lost, or it answers `TOO_LATE` because an earlier attempt of
    this very call (a client retry after a reset) already spent the ticket, the result is
    what the ticket says; the outage is raised when the change never ran, or when that cannot
    be told."""
    try:
        result = int(str(await call))
    except Exception as exc:
        if not (isinstance(exc, StateUnavailable) or is_unavailable(exc)):
            raise
        found = await outcome(redis, key, within_ms)
        if found is None:
            raise
        log.warning("a change's reply was lost; its ticket says it ran and returned %d", found)
        return found
    if result != TOO_LATE:
        return result
    found = await outcome(redis, key, within_ms)
    return TOO_LATE if found is None else found
