"""The fast lane's lent slots: the leader lends free worker slots, gateways take them.

The take itself is part of `submit.lua` (`RequestStore.submit(..., fast=True)`); this store
is the leader's side: lending and reclaiming, both fenced by its lease token.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from redis.asyncio import Redis

from control_plane.state.client import check_client
from control_plane.state.codec import str_map, text
from control_plane.state.errors import StaleLeader, guarded
from control_plane.state.keys import KeySpace
from control_plane.state.scripts import Scripts


@dataclass(frozen=True, slots=True)
class Loan:
    """Slots to add on one worker of a model: its id, its base URL, how many (> 0)."""

    worker_id: str
    worker_url: str
    slots: int


Reclaimed = dict[tuple[str, str], int]
"""(model, worker id) → lent slots no gateway had taken, now given back to the leader."""


class LentSlots:
    """Owns `lent:<model>`, `lent_urls`, `lent_state` and `lent_models`.

    Rule: a slot is lent by the leader holding the latest fencing token only, and is then
    either taken by exactly one gateway's submit (atomically, with the request's grant) or
    reclaimed by a leader holding the latest token — never both, never twice: every change
    is one script. Guarantee to the leader: the slots it lent minus what `reclaim` returned
    are exactly the takes it has still to read on `arrivals` (each take carries `lent_by`,
    the lender's token, so a new leader can tell its predecessor's takes from its own).
    Every call carries `seq`, the next number of the caller's own sequence (per token): a
    call repeated with the same number after a lost reply is applied once, and a repeated
    `reclaim` returns what its first try took back, so the leader's count stays exact
    through Redis outages if it repeats an unanswered call before making the next one.
    """

    def __init__(self, redis: Redis, keyspace: KeySpace) -> None:
        self._redis = check_client(redis)
        self._ks = keyspace
        self._scripts = Scripts(redis)

    @guarded
    async def lend(
        self, model: str, loans: Collection[Loan], *, fencing_token: int, seq: int
    ) -> None:
        """Add `loans` to `model`'s lent slots; raises `StaleLeader` for a deposed leader."""
        if not loans:
            raise ValueError("a lend call lends at least one slot")
        ks = self._ks
        args: list[str | int] = [str(fencing_token), seq, model]
        for loan in loans:
            if loan.slots <= 0:
                raise ValueError(f"a loan adds at least one slot: {loan}")
            args += [loan.worker_id, loan.worker_url, loan.slots]
        keys = [ks.leader_epoch, ks.lent(model), ks.lent_urls, ks.lent_state, ks.lent_models]
        if int(await self._scripts.call("lend", keys, args)) < 0:
            raise StaleLeader(f"fencing token {fencing_token} is stale: another scheduler leads")

    @guarded
    async def reclaim(
        self, models: Collection[str] | None, *, fencing_token: int, seq: int
    ) -> Reclaimed:
        """Take back the untaken slots of `models` (None: of every model, at a takeover);
        → what was still lent. Raises `StaleLeader` for a deposed leader."""
        if models is not None and not models:
            raise ValueError("reclaim names at least one model (None: every model)")
        ks = self._ks
        args = [str(fencing_token), str(seq), *(models or [])]
        keys = [ks.leader_epoch, ks.lent_models, ks.lent_prefix, ks.lent_state]
        reply = await self._scripts.call("reclaim", keys, args)
        if not isinstance(reply, list):
            raise StaleLeader(f"fencing token {fencing_token} is stale: another scheduler leads")
        flat = [text(x) for x in reply]
        return {(m, w): int(n) for m, w, n in zip(flat[::3], flat[1::3], flat[2::3], strict=True)}

    @guarded
    async def lent(self) -> dict[str, dict[str, int]]:
        """Every model's untaken lent slots: model → worker id → slots (for tools and tests)."""
        models = sorted(text(m) for m in await self._redis.smembers(self._ks.lent_models))
        out: dict[str, dict[str, int]] = {}
        for model in models:
            raw: Mapping[str, str] = str_map(await self._redis.hgetall(self._ks.lent(model)))
            if raw:
                out[model] = {worker: int(n) for worker, n in raw.items()}
        return out

    @guarded
    async def queued_by_model(self) -> dict[str, int]:
        """Queued requests per model (models with none are absent)."""
        raw = str_map(await self._redis.hgetall(self._ks.model_queued))
        return {model: int(n) for model, n in raw.items()}
