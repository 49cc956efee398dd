"""Checking `grants:<gateway>` entries before a gateway sees them (poison pills stay out)."""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis

from control_plane.contracts.grants import Grant, GrantError, decode_grant
from control_plane.state.codec import stream_entries
from control_plane.state.dead_letters import DeadLetters


async def screen_grants(
    redis: Redis, dead: DeadLetters, stream: str, reply: Any
) -> list[tuple[str, Grant]]:
    """The well-formed entries of an XREAD reply; the others are dead-lettered and deleted
    from `stream` (it has one reader, so nobody else needs them)."""
    good: list[tuple[str, Grant]] = []
    for entry_id, fields in stream_entries(reply):
        try:
            good.append((entry_id, decode_grant(fields)))
            continue
        except GrantError as exc:
            problem = str(exc)
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
