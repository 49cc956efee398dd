"""Consumer-group plumbing shared by the arrivals and events readers."""

from __future__ import annotations

from redis.asyncio import Redis
from redis.exceptions import ResponseError


def is_missing_group(exc: ResponseError) -> bool:
    """True for NOGROUP: the stream or its group vanished (e.g. Redis restarted empty)."""
    return str(exc).startswith("NOGROUP")


async def ensure_group(redis: Redis, stream: str, group: str) -> bool:
    """Create `group` on `stream` (and the stream) reading from the start; True if created.

    Starting at id 0 means a group created after entries were written still sees them; an
    existing group is left as it is (BUSYGROUP is not an error).
    """
    try:
        await redis.xgroup_create(stream, group, id="0", mkstream=True)
    except ResponseError as exc:
        if str(exc).startswith("BUSYGROUP"):
            return False
        raise
    return True
