"""Gateway replica liveness: heartbeats, and which replicas are lost."""

from __future__ import annotations

from typing import cast

from redis.asyncio import Redis

from control_plane.state.client import check_client
from control_plane.state.codec import text, time_arg
from control_plane.state.errors import guarded
from control_plane.state.keys import KeySpace
from control_plane.state.scripts import Scripts


def _ttl_ms(ttl_s: float) -> int:
    if ttl_s <= 0:
        raise ValueError(f"gateway liveness ttl must be positive, got {ttl_s}")
    return max(1, round(ttl_s * 1000))


class GatewayRegistry:
    """Which gateway replicas are alive, and which were seen and then went silent (lost).

    Rule: each replica `beat`s every `gateway_heartbeat_s`, which registers its id and sets its
    liveness key to expire `gateway_dead_after_s` later; a clean shutdown deletes the liveness
    key (`leave`). A replica is *lost* when it is registered and its liveness key is gone. Expiry
    is measured by Redis, so the replicas' and the scheduler's clocks do not matter. A lost
    replica stays registered until the scheduler leader `forget`s it, which it does only once
    nothing of that replica is left in Redis; ids never registered are never reported lost. A
    replica without its liveness key that submits a request is registered again by the submit
    (score raised): every request stored by `submit.lua` has a registered owner.
    """

    def __init__(self, redis: Redis, keyspace: KeySpace) -> None:
        self._redis = check_client(redis)
        self._ks = keyspace
        self._scripts = Scripts(redis)

    @guarded
    async def beat(self, gateway_id: str, *, ttl_s: float, now: float) -> bool:
        """Register `gateway_id` as alive for `ttl_s`; False when it was not alive before."""
        ks = self._ks
        result = await self._scripts.call(
            "gateway_beat",
            [ks.gateway_alive(gateway_id), ks.gateways],
            [gateway_id, _ttl_ms(ttl_s), time_arg(now)],
        )
        return bool(result)

    @guarded
    async def leave(self, gateway_id: str) -> None:
        """Clean shutdown: the replica is lost at once, so whatever it left is released soon."""
        await self._redis.delete(self._ks.gateway_alive(gateway_id))

    @guarded
    async def is_alive(self, gateway_id: str) -> bool:
        """True while `gateway_id`'s liveness key exists."""
        return bool(await self._redis.exists(self._ks.gateway_alive(gateway_id)))

    @guarded
    async def registered(self) -> dict[str, float]:
        """Registered replicas (alive or lost) → time of their latest beat or of a submit made
        without their liveness key (their clock), never lowered; one that finds the replica
        lost raises it above any earlier score."""
        reply = await self._redis.zrange(self._ks.gateways, 0, -1, withscores=True)
        pairs = cast(list[tuple[str, float]], reply)
        return {text(member): float(score) for member, score in pairs}

    @guarded
    async def lost(self) -> list[str]:
        """Registered replicas whose liveness key has expired or was deleted, sorted."""
        return sorted(await self.lost_scores())

    @guarded
    async def lost_scores(self) -> dict[str, float]:
        """The lost replicas (as `lost`) → their registry score, read before their liveness:
        what `forget` is handed, so that a beat or a submit since this read keeps them."""
        scores = await self.registered()
        if not scores:
            return {}
        ids = sorted(scores)
        pipe = self._redis.pipeline(transaction=False)
        for gateway_id in ids:
            pipe.exists(self._ks.gateway_alive(gateway_id))
        alive = await pipe.execute()
        return {g: scores[g] for g, live in zip(ids, alive, strict=True) if not live}

    @guarded
    async def forget(self, gateway_id: str, *, score: float) -> bool:
        """Unregister a lost replica and delete its grants stream; False when it is alive, or
        its registry score is no longer `score` (the one `lost_scores` read): it beat or
        stored a request since."""
        ks = self._ks
        result = await self._scripts.call(
            "gateway_forget",
            [ks.gateway_alive(gateway_id), ks.gateways, ks.grants(gateway_id)],
            [gateway_id, repr(float(score))],
        )
        return bool(result)
