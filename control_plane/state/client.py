"""Creating the asyncio Redis client every store uses."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast

from redis._parsers.encoders import Encoder
from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import MasterNotFoundError
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import AuthenticationError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from control_plane.state.errors import guarded
from control_plane.state.mux import ENCODING_ERRORS, Multiplexer
from control_plane.state.sentinel import SentinelTarget, sentinel_client

T = TypeVar("T")

SOCKET_TIMEOUT_S = 2.0
"""Read timeout of one command: a stalled Redis (paused, partitioned) surfaces within it as
`StateUnavailable`. Blocking reads are capped well below it (`MAX_BLOCK_MS`)."""
MAX_BLOCK_MS = 1_000
"""Longest BLOCK any reader sends; longer requests are shortened (callers loop anyway)."""
_MIN_TIMEOUT_OVER_BLOCK = 1.5


class StrictWrites(Encoder):
    """redis-py's encoder, its `encoding_errors` applied to replies only: a command's text
    is encoded strictly, so one that is not encodable raises instead of reaching Redis with
    `?` in it (two texts would become one key)."""

    __slots__ = ()

    def encode(self, value: Any) -> Any:
        if isinstance(value, str):
            return value.encode(self.encoding)
        return super().encode(value)  # type: ignore[no-untyped-call]


def connect(
    url: str,
    *,
    client_name: str | None = None,
    connect_timeout_s: float = 1.0,
    socket_timeout_s: float = SOCKET_TIMEOUT_S,
    retries: int = 2,
    health_check_interval_s: int = 15,
    max_connections: int = 512,
    pool_timeout_s: float = 2.0,
    sentinel: SentinelTarget | None = None,
    multiplex: bool = True,
) -> Redis:
    """A `redis.asyncio.Redis` for `url`, configured for the state layer.

    Guarantee: no command waits on Redis without bound. Responses are decoded to `str` (every
    store relies on it); bytes that are not UTF-8 — only a hand edit puts them in Redis —
    become U+FFFD instead of raising, which would fail the whole reply they are in (an
    events entry: the batch read with it, each time it is read); a command's text that is not
    encodable (a lone surrogate) still raises, as on the multiplexer. A refused or reset
    connection (or a connect timeout) is retried `retries` times with jittered exponential
    backoff (20 ms … 500 ms), so a blip is absorbed and an outage surfaces within about a
    second as `StateUnavailable`; a command Redis does not answer within `socket_timeout_s`
    (Redis paused or partitioned) fails at once, without retries, so a stall costs each caller
    at most `socket_timeout_s`. Idle connections are health-checked every
    `health_check_interval_s` seconds. At most `max_connections` are
    open; a command waits up to `pool_timeout_s` for a free one (back-pressure, not an error)
    before it fails as unavailable. Creating the client does no I/O.

    With `sentinel`, connections go to the primary Sentinel names (asked with the connect
    timeout on every new connection); `url` then gives only credentials, database and TLS.
    During a fail-over commands fail as unavailable, as in an outage, until the promoted
    replica is named; the pool semantics above are the same.

    With `multiplex` (and neither Sentinel nor TLS), the client is a `MuxRedis`: the Lua
    scripts (`Scripts`) and event publishes go through one pipelined connection of their own
    (`control_plane.state.mux`), with the same connect, read-timeout and retry guarantees;
    the pool's limits and idle health checks do not apply to it (a dead peer shows as a
    command's read timeout, or a reset, and the next command connects anew).
    """
    if socket_timeout_s < _MIN_TIMEOUT_OVER_BLOCK * MAX_BLOCK_MS / 1000:
        raise ValueError(
            f"socket_timeout_s={socket_timeout_s} must exceed blocking reads "
            f"({MAX_BLOCK_MS} ms) by half: a BLOCK read would time out"
        )
    backoff = ExponentialWithJitterBackoff(base=0.02, cap=0.5)
    kwargs: dict[str, Any] = dict(
        decode_responses=True,
        encoding_errors=ENCODING_ERRORS,
        encoder_class=StrictWrites,
        client_name=client_name,
        socket_connect_timeout=connect_timeout_s,
        socket_timeout=socket_timeout_s,
        socket_keepalive=True,
        retry=_StallAwareRetry(backoff, retries),
        health_check_interval=health_check_interval_s,
        max_connections=max_connections,
        timeout=pool_timeout_s,
    )
    if sentinel is not None:
        return sentinel_client(url, sentinel, kwargs, connect_timeout_s)
    if url.startswith("unix://"):
        del kwargs["socket_keepalive"]  # a TCP option: Unix sockets refuse it
    pool = BlockingConnectionPool.from_url(url, **kwargs)
    if not multiplex or url.startswith("rediss://"):
        return Redis.from_pool(pool)
    client = cast(MuxRedis, MuxRedis.from_pool(pool))
    client.mux = Multiplexer(
        url,
        retry=_StallAwareRetry(backoff, retries),
        client_name=client_name,
        connect_timeout_s=connect_timeout_s,
        socket_timeout_s=socket_timeout_s,
    )
    return client


class MuxRedis(Redis):
    """A pooled client that also owns a `Multiplexer` for the hot scripts (see `connect`)."""

    mux: Multiplexer | None = None

    async def aclose(self, close_connection_pool: bool | None = None) -> None:
        if self.mux is not None:
            await self.mux.aclose()
        await super().aclose(close_connection_pool)


class _StallAwareRetry(Retry):
    """Retries refused or reset connections and connect timeouts, never an unanswered command.

    Retrying a command Redis accepted but did not answer (paused, partitioned) would multiply
    the wait by `retries + 1`; a connect timeout, by contrast, is usually a loaded listener.
    """

    async def call_with_retry(
        self,
        do: Callable[[], Awaitable[T]],
        fail: Callable[..., Any],
        is_retryable: Callable[[Exception], bool] | None = None,
        with_failure_count: bool = False,
    ) -> T:
        return await super().call_with_retry(
            do, fail, is_retryable or _worth_retrying, with_failure_count
        )


def _worth_retrying(error: Exception) -> bool:
    if isinstance(error, MasterNotFoundError):
        return False  # a whole Sentinel discovery failed: it already asked every Sentinel
    # redis-py names the phase in the message: "Timeout connecting …" vs "… reading/writing …"
    return not isinstance(error, RedisTimeoutError) or "connecting" in str(error)


def check_client(redis: Redis) -> Redis:
    """Return `redis` if it decodes responses to str (as `connect` makes it), else raise."""
    if not redis.connection_pool.connection_kwargs.get("decode_responses"):
        raise ValueError("state stores need a client with decode_responses=True (use connect())")
    return redis


def clamp_block_ms(block_ms: int | None) -> int | None:
    """`None` stays non-blocking; 0 ("forever") and long waits become `MAX_BLOCK_MS`."""
    if block_ms is None:
        return None
    if block_ms <= 0 or block_ms > MAX_BLOCK_MS:
        return MAX_BLOCK_MS
    return block_ms


@guarded
async def ping(redis: Redis) -> float:
    """Round-trip time of one PING in seconds (for readiness probes)."""
    start = time.perf_counter()
    await redis.ping()
    return time.perf_counter() - start


@guarded
async def server_pid(redis: Redis) -> int | None:
    """The answering server's process id (so a caller that started a server on a port can tell
    its own from another that holds the port); None when it answers but will not say (`INFO`
    refused: a password it does not take, an ACL, a renamed command), which no server we
    started does."""
    try:
        info = await redis.info("server")
    except (ResponseError, AuthenticationError):
        return None
    return int(info["process_id"])


@guarded
async def server_run_id(redis: Redis) -> str:
    """Redis's `run_id`: a new one after every restart of the server (so a caller can tell that
    writes not yet on disk may be gone, and rebuild what it keeps in memory)."""
    info = await redis.info("server")
    return str(info["run_id"])
