"""Operator knobs (policy, weights, queue caps, key revocations) with change notifications."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from types import TracebackType
from typing import TypeVar

from redis.asyncio import Redis
from redis.asyncio.client import PubSub

from control_plane.contracts.knobs import (
    KnobChange,
    KnobValue,
    Other,
    decode_change,
    decode_knob,
)
from control_plane.state import tickets
from control_plane.state.client import SOCKET_TIMEOUT_S, check_client
from control_plane.state.codec import dumps, loads, str_map
from control_plane.state.errors import KnobChanged, StateUnavailable, guarded, is_unavailable
from control_plane.state.keys import KeySpace
from control_plane.state.scripts import Scripts

log = logging.getLogger(__name__)
_PROBE = "arbiter-knobs-probe"
T = TypeVar("T")


class KnobSubscription:
    """Async iterator of typed knob changes (`KnobChange`), in publication order.

    Pub/sub is at most once: changes made while the connection was down are not replayed.
    On `StateUnavailable` a reader re-subscribes and then re-reads `Knobs.get_all()` (compare
    `Knobs.version()`) to catch up. Close it with `aclose()` or `async with`.

    Guarantee: no change is missed silently. A lost connection raises `StateUnavailable`,
    also when redis-py reconnected and re-subscribed on its own (a killed connection, a
    fail-over): every later `__anext__` then raises it, so the reader catches up as above.
    A dead or silent connection is noticed too: after `probe_after_s` without traffic the
    subscription PINGs Redis on its own connection; no PONG within `SOCKET_TIMEOUT_S` raises
    `StateUnavailable` (a half-open socket would otherwise wait for messages forever).
    """

    def __init__(self, pubsub: PubSub, probe_after_s: float = 5.0) -> None:
        self._pubsub = pubsub
        self._probe_after_s = probe_after_s
        self._last_heard = time.monotonic()
        self._probe_sent_at: float | None = None
        self._reconnected = False
        # registered after the first connect, so only reconnects call it (kept as a weak
        # method by redis-py: this object, held by its reader, keeps it alive)
        self._connection = pubsub.connection
        if self._connection is not None:
            self._connection.register_connect_callback(self._note_reconnect)

    def _note_reconnect(self, _connection: object) -> None:
        self._reconnected = True

    def __aiter__(self) -> KnobSubscription:
        return self

    async def __anext__(self) -> KnobChange:
        while True:
            # every reply counts as a sign of life (redis-py mis-parses a decoded PONG, so
            # subscribe confirmations and pongs are not filtered by type here)
            message = await self._unavailable_as_state(
                self._pubsub.get_message(ignore_subscribe_messages=False, timeout=1.0)
            )
            if self._reconnected:
                raise StateUnavailable(
                    "knobs subscription: the connection to Redis was re-established; "
                    "changes published meanwhile were missed (re-subscribe and re-read)"
                )
            now = time.monotonic()
            if message is None:
                await self._probe(now)
                continue
            self._last_heard, self._probe_sent_at = now, None
            if message["type"] == "message":
                try:
                    return decode_change(loads(message["data"]))
                except ValueError as exc:  # never fatal: the next get_all() re-reads the store
                    log.warning("skipping a knob change that does not decode: %s", exc)

    async def _probe(self, now: float) -> None:
        if self._probe_sent_at is not None:
            if now - self._probe_sent_at > SOCKET_TIMEOUT_S:
                raise StateUnavailable("knobs subscription: Redis did not answer a PING")
        elif now - self._last_heard > self._probe_after_s:
            self._probe_sent_at = now
            await self._unavailable_as_state(self._pubsub.ping(_PROBE))

    @staticmethod
    async def _unavailable_as_state(call: Awaitable[T]) -> T:
        try:
            async with asyncio.timeout(SOCKET_TIMEOUT_S + 1.0):
                return await call
        except Exception as exc:
            if is_unavailable(exc):
                raise StateUnavailable(f"knobs subscription lost: {exc}") from exc
            raise

    async def aclose(self) -> None:
        """Unsubscribe and release the connection (bounded: a stalled Redis cannot hold it)."""
        if self._connection is not None:  # back in the pool, its later connects are not ours
            self._connection.deregister_connect_callback(self._note_reconnect)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(SOCKET_TIMEOUT_S):
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


REPLACE_WITHIN_MS = 1_000
"""How long after it was sent a `replace` may still run: half the client's read timeout, so a
call its caller gave up on never applies."""


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
    async def get_all(self) -> dict[str, KnobValue]:
        """Every knob and its typed value."""
        raw = await self._redis.hgetall(self._ks.knobs)
        return {name: _typed(name, value) for name, value in str_map(raw).items()}

    @guarded
    async def get(self, name: str) -> KnobValue | None:
        """One knob's typed value, or None when unset."""
        raw = await self._redis.hget(self._ks.knobs, name)
        return None if raw is None else _typed(name, raw)

    @guarded
    async def set(self, name: str, value: KnobValue) -> int:
        """Store a knob value, announce it; returns the new version."""
        ks = self._ks
        version = await self._scripts.call(
            "knob_set",
            [ks.knobs, ks.knobs_version],
            [name, dumps(value.to_json()), ks.knobs_channel],
        )
        return int(version)

    @guarded
    async def read(self, name: str) -> tuple[KnobValue | None, str]:
        """One knob's typed value and its stored text ("" when unset), for `replace`."""
        raw = await self._redis.hget(self._ks.knobs, name)
        if raw is None:
            return None, ""
        text = raw.decode() if isinstance(raw, bytes) else str(raw)
        return _typed(name, text), text

    async def replace(
        self, name: str, value: KnobValue, *, expected: str, within_ms: int = REPLACE_WITHIN_MS
    ) -> int:
        """Store `value` only if the knob still holds `expected` (its text from `read`) and the
        change runs within `within_ms` of this call on Redis's clock; → the new version.
        `replace_many` of one knob (its errors)."""
        return await self.replace_many([(name, value, expected)], within_ms=within_ms)

    @guarded
    async def replace_many(
        self,
        changes: Sequence[tuple[str, KnobValue, str]],
        *,
        within_ms: int = REPLACE_WITHIN_MS,
    ) -> int:
        """Store every (name, value, expected) in one step, only if each knob still holds its
        `expected` text (from `read`) and the step runs within `within_ms` of this call on
        Redis's clock; → the last new version (each knob gets its own, announced in order).

        `KnobChanged` when any of them changed meanwhile (then none is stored);
        `StateUnavailable` when Redis ran the call too late — its caller, having timed out,
        must not find it applied afterwards — or when it cannot tell. The bound is a ticket
        (`state/tickets.py`): when the reply is lost, the ticket says whether the change ran
        and what it returned, so a change that ran is reported as such, never as a failure.
        """
        names = [name for name, _, _ in changes]
        if not names or len(set(names)) != len(names):
            raise ValueError(f"replace_many: at least one knob, none named twice: {names}")
        ks = self._ks
        (name, value, expected), more = changes[0], changes[1:]
        args = [name, dumps(value.to_json()), ks.knobs_channel, expected]
        for other, other_value, other_expected in more:
            args += [other, dumps(other_value.to_json()), other_expected]
        ticket = tickets.ticket_key(ks.knobs)
        await tickets.issue(self._redis, ticket, within_ms)
        call = self._scripts.call("knob_set", [ks.knobs, ks.knobs_version, ticket], args)
        version = await tickets.ticketed(self._redis, call, ticket, within_ms)
        listed = ", ".join(repr(n) for n in names)
        what = f"knob {listed}" if len(names) == 1 else f"knobs {listed}"
        if version == -1:
            raise KnobChanged(f"{what} changed meanwhile")
        if version == -2:
            raise StateUnavailable(f"redis ran the change of {what} past its deadline")
        return version

    @guarded
    async def update(
        self, name: str, change: Callable[[KnobValue | None], KnobValue], attempts: int = 32
    ) -> int:
        """Read-modify-write one knob atomically: `change` gets the stored value and returns
        the new one, which is stored only if nothing was stored in between (else read again).
        Returns the new version; `StateUnavailable` after `attempts` lost races."""
        ks = self._ks
        for _ in range(attempts):
            raw = await self._redis.hget(ks.knobs, name)
            current = None if raw is None else _typed(name, raw)
            expected = "" if raw is None else (raw.decode() if isinstance(raw, bytes) else raw)
            value = change(current)
            version = await self._scripts.call(
                "knob_set",
                [ks.knobs, ks.knobs_version],
                [name, dumps(value.to_json()), ks.knobs_channel, expected],
            )
            if int(version) >= 0:
                return int(version)
        raise StateUnavailable(f"knob {name!r}: {attempts} concurrent changes in a row")

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


def _typed(name: str, raw: str | bytes) -> KnobValue:
    """The knob's typed value; one that does not decode is kept as `Other` (and logged), so
    readers that need its type skip it as they skipped an invalid value before."""
    try:
        value = loads(raw)
    except ValueError as exc:  # not JSON at all (a hand edit): kept as its text
        log.warning("knob %s is not JSON: %s", name, exc)
        return Other(raw.decode(errors="replace") if isinstance(raw, bytes) else raw)
    try:
        return decode_knob(name, value)
    except ValueError as exc:
        log.warning("knob %s does not decode: %s", name, exc)
        return Other(value)
