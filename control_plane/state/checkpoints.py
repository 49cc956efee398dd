"""Named JSON checkpoints: the leader's state for a successor, and the live view."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Final, TypeVar

from redis.asyncio import Redis

from control_plane.contracts.checkpoints import (
    LeaderState,
    LiveView,
    decode_leader_state,
    decode_live_view,
)
from control_plane.state.client import check_client
from control_plane.state.codec import dumps, loads
from control_plane.state.errors import guarded
from control_plane.state.keys import KeySpace
from control_plane.state.scripts import Scripts

log = logging.getLogger(__name__)
T = TypeVar("T")
LEADER: Final = "ledger"
LIVE: Final = "live"


class Checkpoint:
    """Whole-document JSON checkpoints by name: the leader's state (`ledger`), its live view
    (`live`), and any other JSON document by name (`save` / `load`).

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

    async def save_leader(self, state: LeaderState, *, fencing_token: int | None = None) -> bool:
        """The leader's state for a successor (see `save` for the fencing)."""
        return await self.save(LEADER, state.to_json(), fencing_token=fencing_token)

    async def load_leader(self) -> LeaderState | None:
        """The last leader's state; None when never saved or not decodable (logged)."""
        raw = await self.load(LEADER)
        return None if raw is None else _decoded(LEADER, raw, decode_leader_state)

    async def save_live(self, view: LiveView, *, fencing_token: int | None = None) -> bool:
        """The leader's live view (see `save` for the fencing)."""
        return await self.save(LIVE, view.to_json(), fencing_token=fencing_token)

    async def load_live(self) -> LiveView | None:
        """The last live view; None when never saved or not decodable (logged)."""
        raw = await self.load(LIVE)
        return None if raw is None else _decoded(LIVE, raw, decode_live_view)


def _decoded(name: str, raw: dict[str, Any], decode: Callable[[object], T]) -> T | None:
    try:
        return decode(raw)
    except ValueError as exc:
        log.warning("checkpoint %s does not decode: %s", name, exc)
        return None
