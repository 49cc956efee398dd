"""Checking `grants:<gateway>` entries before a gateway sees them (poison pills stay out)."""

from __future__ import annotations

from typing import Any, Final

from redis.asyncio import Redis

from control_plane.state.codec import StreamEntry, stream_entries
from control_plane.state.dead_letters import DeadLetters

REQUIRED: Final = ("id", "worker_id", "worker_url")


def grant_problem(fields: dict[str, str]) -> str | None:
    """Why an entry is not a usable grant, or None when it is one."""
    missing = [name for name in REQUIRED if not fields.get(name)]
    if missing:
        return f"grant lacks {', '.join(missing)}"
    try:
        float(fields.get("granted_at", 0.0))
    except ValueError:
        return f"granted_at is not a number: {fields.get('granted_at')!r}"
    return None


async def screen_grants(
    redis: Redis, dead: DeadLetters, stream: str, reply: Any
) -> list[StreamEntry]:
    """The well-formed entries of an XREAD reply; the others are dead-lettered and deleted
    from `stream` (it has one reader, so nobody else needs them)."""
    good: list[StreamEntry] = []
    for entry_id, fields in stream_entries(reply):
        problem = grant_problem(fields)
        if problem is None:
            good.append((entry_id, fields))
            continue
        await dead.add(
            consumer="gateway",
            kind="decode",
            reason=problem,
            source=stream,
            entry_id=entry_id,
            fields=fields,
        )
        await redis.xdel(stream, entry_id)
    return good
