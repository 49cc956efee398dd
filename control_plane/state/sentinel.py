"""Connections through Redis Sentinel: the pool that follows the primary across fail-overs."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from redis import exceptions as rex
from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.connection import SSLConnection, parse_url
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel, SentinelConnectionPool
from redis.backoff import NoBackoff

REDISCOVER_S = 1.0
"""How often (at most) a pool in use asks the Sentinels again which node is the primary."""


@dataclass(frozen=True, slots=True)
class SentinelTarget:
    """Where Sentinel is asked for the primary of `service` (`ARBITER_REDIS_SENTINELS`)."""

    addresses: tuple[tuple[str, int], ...]
    service: str
    password: str | None = None
    """Password of the Sentinel processes themselves (the data nodes' is in the Redis URL)."""


class BlockingSentinelPool(SentinelConnectionPool, BlockingConnectionPool):
    """A `SentinelConnectionPool` that waits for a free connection like `BlockingConnectionPool`.

    Rule: every new connection asks Sentinel for the current primary; a connection to a primary
    that was demoted answers READONLY and is dropped (redis-py's `SentinelManagedConnection`),
    so after a fail-over every command reaches the promoted replica once Sentinel names it.

    Rule: a connection open to a node Sentinel no longer names is closed before its next
    command, which then reconnects to the one it names. While the pool is in use the
    Sentinels are asked again at most every `REDISCOVER_S`, in the background (a command
    never waits for it; a discovery that fails changes nothing). Before, only a new
    connection asked: one that stayed open through a fail-over (idle while the old primary
    was stalled or cut off) went on writing to the old primary once it answered again, until
    Sentinel demoted it (≈ 10 s), and every such write was lost.
    """

    def __init__(self, service_name: str, sentinel_manager: Sentinel, **kwargs: Any) -> None:
        super().__init__(service_name, sentinel_manager, **kwargs)  # type: ignore[no-untyped-call]
        self._asked_at = float("-inf")
        self._asking: asyncio.Task[None] | None = None

    async def get_connection(self, *args: Any, **options: Any) -> Any:
        self._rediscover_soon()
        get = super().get_connection
        connection = await get(*args, **options)  # type: ignore[no-untyped-call]
        if self._elsewhere(connection):
            try:
                await connection.disconnect()
                await self.ensure_connection(connection)  # asks Sentinel, connects there
            except BaseException:
                await self.release(connection)
                raise
        return connection

    def _elsewhere(self, connection: Any) -> bool:
        """True when `connection` is open to a node other than the primary last named."""
        address = self.master_address
        return (
            address is not None
            and connection.is_connected
            and (connection.host, connection.port) != tuple(address)
        )

    def _rediscover_soon(self) -> None:
        if self.master_address is None or self._asking is not None:
            return  # none found yet: the next connection asks anyway
        if time.monotonic() - self._asked_at < REDISCOVER_S:
            return
        self._asking = asyncio.get_running_loop().create_task(self._rediscover())

    async def _rediscover(self) -> None:
        try:
            # a new address is stored and the idle connections are closed (redis-py)
            await self.get_master_address()
        except Exception:  # no answer: the connections' own errors will tell
            pass
        finally:
            self._asking = None

    async def get_master_address(self) -> Any:
        self._asked_at = time.monotonic()
        return await super().get_master_address()  # type: ignore[no-untyped-call]

    async def disconnect(self, inuse_connections: bool = True) -> None:
        if inuse_connections and self._asking is not None:
            self._asking.cancel()
            await asyncio.wait([self._asking])
            self._asking = None
        await super().disconnect(inuse_connections)


async def named_elsewhere(client: Redis, timeout_s: float) -> bool:
    """True when the Sentinels now name a primary other than the node `client` (a client with
    a connection of its own, `Redis.client()`, that sent a command) is connected to: that
    node was deposed by a fail-over (cut off or stalled meanwhile) and what it takes is lost.
    False when they name it, when none answers within `timeout_s`, and without Sentinel.
    Asking also moves the pool's other connections to the primary named
    (`BlockingSentinelPool`).

    Guarantee: returns within `timeout_s`. A discovery asks every Sentinel in turn, each
    bounded by the Sentinel timeout, so silent Sentinels (a partition, dead hosts) cost their
    number times it: unbounded here, that outlasted the scheduler's bound on an acquire and
    every tenure was cut there, taken anew and cut again (no leader at all)."""
    pool, connection = client.connection_pool, client.connection
    if not isinstance(pool, SentinelConnectionPool) or connection is None:
        return False
    try:
        async with asyncio.timeout(timeout_s):
            named = await pool.get_master_address()  # type: ignore[no-untyped-call]
    except (rex.ConnectionError, rex.TimeoutError, TimeoutError):  # incl. MasterNotFoundError
        return False
    return bool((connection.host, connection.port) != tuple(named))


def sentinel_client(
    url: str, target: SentinelTarget, pool_kwargs: dict[str, Any], sentinel_timeout_s: float
) -> Redis:
    """A client for the primary Sentinel names for `target.service`.

    `url` gives the data nodes' credentials, database and TLS, with its query options (a
    CA file: `?ssl_ca_certs=…`) as a direct connection takes them (its host and port are not
    used; before, every option but the password and database was dropped, so a private CA
    failed every connection); `pool_kwargs` are the pool's settings as `connect` builds
    them. Does no I/O.

    Guarantee: finding the primary asks each Sentinel once, in turn, each ask bounded by
    `sentinel_timeout_s` to connect and again to answer; a dead or silent Sentinel costs one
    such try and discovery asks the next one. So one discovery takes at most the number of
    Sentinels times those bounds, with no overall cap on top (any shorter cap would skip the
    healthy Sentinels behind a silent one). A discovery that found no primary is not retried
    (`connect`'s `retries` are for the data connection's blips): before, they re-ran it, up to
    three times those bounds.
    """
    node = _node_kwargs(url)
    sentinel_kwargs: dict[str, Any] = {
        "socket_connect_timeout": sentinel_timeout_s,
        "socket_timeout": sentinel_timeout_s,
        "decode_responses": True,
        # redis-py's default would retry one Sentinel 10 times with backoff before the next
        "retry": Retry(NoBackoff(), 0),
    }
    if target.password:
        sentinel_kwargs["password"] = target.password
    manager = Sentinel(  # type: ignore[no-untyped-call]
        list(target.addresses), sentinel_kwargs=sentinel_kwargs
    )
    return manager.master_for(  # type: ignore[no-any-return]
        target.service,
        redis_class=Redis,
        connection_pool_class=BlockingSentinelPool,
        **{**pool_kwargs, **node},  # the URL's own options win, as with a direct URL
    )


_ADDRESS = ("host", "port", "path", "connection_class")
"""What a URL says that Sentinel decides instead: where the primary is (and how to reach it,
but for TLS, kept as `ssl`)."""


def _node_kwargs(url: str) -> dict[str, Any]:
    """The data nodes' connection settings from `url`: credentials, database, TLS (with the
    URL's `ssl_*` options: a private CA, client certificates) and its other options, as a
    direct connection takes them; never its host and port."""
    parsed = parse_url(url)
    out: dict[str, Any] = {
        key: value for key, value in parsed.items() if key not in _ADDRESS and value is not None
    }
    if parsed.get("connection_class") is SSLConnection:
        out["ssl"] = True
    return out


def parse_addresses(text: str) -> tuple[tuple[str, int], ...]:
    """`host:port,host:port` → ((host, port), …); raises ValueError naming a bad item."""
    out = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        host, colon, port = item.rpartition(":")
        if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"{item!r}: expected host:port (e.g. 10.0.0.5:26379)")
        out.append((host.strip("[]"), int(port)))
    return tuple(out)


def target_of(
    addresses: str | Sequence[tuple[str, int]], service: str, password: str = ""
) -> SentinelTarget | None:
    """The Sentinel target for these settings, or None when no Sentinel is named."""
    parsed = parse_addresses(addresses) if isinstance(addresses, str) else tuple(addresses)
    if not parsed:
        return None
    if not service:
        raise ValueError("a Sentinel service name is required with Sentinel addresses")
    return SentinelTarget(parsed, service, password or None)


class SentinelSettings(Protocol):
    """The settings `sentinel_of` reads (`control_plane.settings.Settings` has them)."""

    @property
    def redis_sentinels(self) -> str: ...

    @property
    def redis_sentinel_service(self) -> str: ...

    @property
    def redis_sentinel_password(self) -> str: ...


def sentinel_of(settings: SentinelSettings) -> SentinelTarget | None:
    """The Sentinel target of a process's settings (None: connect to `redis_url` directly)."""
    return target_of(
        settings.redis_sentinels, settings.redis_sentinel_service, settings.redis_sentinel_password
    )
