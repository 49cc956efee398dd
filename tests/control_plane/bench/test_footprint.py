"""The soak's Redis memory reading works against `arbiter up`'s password-protected Redis, and
the password reaches `redis-cli` through its environment, never its command line."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest
import redis

from control_plane.bench.footprint import _without_password, redis_used_memory
from tests.support.redis_server import RedisServer


def test_the_password_leaves_the_url() -> None:
    assert _without_password("redis://:p%40ss@127.0.0.1:7/0") == (
        "redis://127.0.0.1:7/0",
        None,
        "p@ss",
    )
    assert _without_password("redis://bob:pw@h:1/2") == ("redis://h:1/2", "bob", "pw")
    assert _without_password("redis://127.0.0.1:7/0") == ("redis://127.0.0.1:7/0", None, None)


@pytest.fixture
def protected() -> Iterator[int]:
    """A fresh redis-server whose default user needs `s3cret` and whose user `ops` (password
    `opspw`) may run INFO; its port."""
    if shutil.which("redis-cli") is None:
        pytest.skip("redis-cli is not installed")
    server = RedisServer()
    server.start()
    try:
        client = redis.Redis(port=server.port)
        client.execute_command("ACL", "SETUSER", "ops", "on", ">opspw", "+info", "~*")
        client.config_set("requirepass", "s3cret")
        client.close()
        yield server.port
    finally:
        server.stop()


async def test_used_memory_of_a_redis_that_requires_a_password(protected: int) -> None:
    used = await redis_used_memory(f"redis://:s3cret@127.0.0.1:{protected}/0")
    assert used is not None and used > 0
    assert await redis_used_memory(f"redis://:wrong@127.0.0.1:{protected}/0") is None


async def test_used_memory_as_a_named_user(protected: int) -> None:
    used = await redis_used_memory(f"redis://ops:opspw@127.0.0.1:{protected}/0")
    assert used is not None and used > 0
