"""The soak's Redis memory reading works against `arbiter up`'s password-protected Redis, and
the password reaches `redis-cli` through its environment, never its command line."""

from __future__ import annotations

import shutil

import pytest
import redis

from control_plane.bench.footprint import _without_password, redis_used_memory
from tests.support.redis_server import RedisServer


def test_the_password_leaves_the_url() -> None:
    assert _without_password("redis://:p%40ss@127.0.0.1:7/0") == (
        "redis://127.0.0.1:7/0",
        "p@ss",
    )
    assert _without_password("redis://bob:pw@h:1/2") == ("redis://bob@h:1/2", "pw")
    assert _without_password("redis://127.0.0.1:7/0") == ("redis://127.0.0.1:7/0", None)


async def test_used_memory_of_a_redis_that_requires_a_password() -> None:
    if shutil.which("redis-cli") is None:
        pytest.skip("redis-cli is not installed")
    server = RedisServer()
    server.start()
    try:
        client = redis.Redis(port=server.port)
        client.config_set("requirepass", "s3cret")
        client.close()
        url = f"redis://:s3cret@127.0.0.1:{server.port}/0"
        used = await redis_used_memory(url)
        assert used is not None and used > 0
        assert await redis_used_memory(f"redis://:wrong@127.0.0.1:{server.port}/0") is None
    finally:
        server.stop()
