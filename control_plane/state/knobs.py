"""Operator knobs (policy, weights, queue caps, key revocations) with change notifications."""

from __future__ import annotations

from types import TracebackType
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.client import PubSub

from control_plane.state.client import check_client
from control_plane.state.codec import dumps, loads, str_map
from control_plane.state.errors import StateUnavailable, guarded, is_unavailable
from control_plane.state.keys import KeySpace
from control_plane.state.scripts import Scripts


class KnobSubscription:
    """Async iterator of knob changes `{"name", "value", "version"}`, in publication order.

    Pub/sub is at most once: changes made while the connection was down are not replayed.
    On `StateUnavailable` a reader re-subscribes and then re-reads `Knobs.get_all()` (compare
    `Knobs.version()`) to catch up. Close it with `aclose()` or `async with`.
    """

    def __init__(self, pubsub: PubSub) -> None:
        self._pubsub = pubsub

    def __aiter__(self) -> KnobSubscription:
        return self

    async def __anext__(self) -> dict[str, Any]:
        while True:
            try:
                message = await self._pubsub.get_message(
                    ignore_subscribe_messages=True, timeout=1.0
                )
            except Exception as exc:
                if is_unavailable(exc):
                    raise StateUnavailable(f"knobs subscription lost: {exc}") from exc
                raise
            if message is not None and message["type"] == "message":
                change: dict[str, Any] = loads(message["data"])
                return change

    async def aclose(self) -> None:
        """Unsubscribe and release the connection."""
        await self._pubsub.aclose()  # type: ignore[no-untyped-call]  # untyped in redis-py

    async def __aenter__(self) -> KnobSubscription:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class Knobs:
    """Knob name → JSON value, with a version bumped and announced on every change.

    `set` stores, bumps and publishes in one script, so a subscriber that sees version v can
    read every value up to v with `get_all()`.
    """

    def __init__(self, redis: Redis, keyspace: KeySpace) -> None:
        self._redis = check_client(redis)
        self._ks = keyspace
        self._scripts = Scripts(redis)

    @guarded
    async def get_all(self) -> dict[str, Any]:
        """Every knob and its value."""
        raw = await self._redis.hgetall(self._ks.knobs)
        return {name: loads(value) for name, value in str_map(raw).items()}

    @guarded
    async def get(self, name: str, default: Any = None) -> Any:
        """One knob's value, or `default` when unset."""
        raw = await self._redis.hget(self._ks.knobs, name)
        return default if raw is None else loads(raw)

    @guarded
    async def set(self, name: str, value: Any) -> int:
        """Store a knob value (any JSON value), announce it; returns the new version."""
        ks = self._ks
        version = await self._scripts.call(
            "knob_set", [ks.knobs, ks.knobs_version], [name, dumps(value), ks.knobs_channel]
        )
        return int(version)

    @guarded
    async def version(self) -> int:
        """Number of changes made so far (0 when no knob was ever set)."""
        return int(await self._redis.get(self._ks.knobs_version) or 0)

    @guarded
    async def subscribe(self) -> KnobSubscription:
        """Start listening to changes; the subscription is active when this returns."""
        pubsub = self._redis.pubsub()
        try:
            await pubsub.subscribe(self._ks.knobs_channel)
        except BaseException:
            await pubsub.aclose()  # type: ignore[no-untyped-call]
            raise
        return KnobSubscription(pubsub)
