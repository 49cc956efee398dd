"""Named JSON checkpoints: the scheduler's policy and ledger state, the live snapshot."""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis

from control_plane.state.client import check_client
from control_plane.state.codec import dumps, loads
from control_plane.state.errors import guarded
from control_plane.state.keys import KeySpace
from control_plane.state.scripts import Scripts


class Checkpoint:
    """Whole-document JSON checkpoints by name (`policy`, `ledger`, `live`, ...).

    A save replaces the document atomically. With a `fencing_token` (the leader's
    `LeaderLease.token`) the save happens only while that token is current, so a deposed
    leader cannot overwrite what its successor wrote.
    """

    def __init__(self, redis: Redis, keyspace: KeySpace) -> None:
        self._redis = check_client(redis)
        self._ks = keyspace
        self._scripts = Scripts(redis)

    @guarded
    async def save(
        self, name: str, data: dict[str, Any], *, fencing_token: int | None = None
    ) -> bool:
        """Write checkpoint `name`; False (nothing written) when `fencing_token` is stale."""
        token = "" if fencing_token is None else str(fencing_token)
        result = await self._scripts.call(
            "checkpoint_save",
            [self._ks.checkpoint(name), self._ks.leader_epoch],
            [dumps(data), token],
        )
        return bool(result)

    @guarded
    async def load(self, name: str) -> dict[str, Any] | None:
        """Checkpoint `name`, or None when never saved."""
        raw = await self._redis.get(self._ks.checkpoint(name))
        if raw is None:
            return None
        data: dict[str, Any] = loads(raw)
        return data
