"""Creating the asyncio Redis client every store uses."""

from __future__ import annotations

import time

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff

from control_plane.state.errors import guarded

SOCKET_TIMEOUT_S = 10.0
"""Read timeout of one command; blocking reads are capped well below it (`MAX_BLOCK_MS`)."""
MAX_BLOCK_MS = 5_000
"""Longest BLOCK any reader sends; longer requests are shortened (callers loop anyway)."""


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
) -> Redis:
    """A `redis.asyncio.Redis` for `url`, configured for the state layer.

    Responses are decoded to `str` (every store relies on it). A failed command is retried
    `retries` times with jittered exponential backoff (20 ms … 500 ms) so a blip is absorbed
    and an outage surfaces within about a second as `StateUnavailable`. Idle connections are
    health-checked every `health_check_interval_s` seconds. At most `max_connections` are open;
    a command waits up to `pool_timeout_s` for a free one (back-pressure, not an error) before
    it fails as unavailable. Creating the client does no I/O.
    """
    backoff = ExponentialWithJitterBackoff(base=0.02, cap=0.5)
    pool = BlockingConnectionPool.from_url(
        url,
        decode_responses=True,
        client_name=client_name,
        socket_connect_timeout=connect_timeout_s,
        socket_timeout=socket_timeout_s,
        socket_keepalive=True,
        retry=Retry(backoff, retries),
        health_check_interval=health_check_interval_s,
        max_connections=max_connections,
        timeout=pool_timeout_s,
    )
    return Redis.from_pool(pool)


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
