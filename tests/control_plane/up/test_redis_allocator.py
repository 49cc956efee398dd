"""`arbiter up` starts Redis with an allocator that hands freed pages back within a second."""

from __future__ import annotations

import os

import pytest
import redis

from control_plane.up.redis_child import REDIS_DIRTY_DECAY_MS, redis_allocator_env
from tests.support.redis_server import RedisServer


def test_the_operators_own_malloc_conf_wins() -> None:
    assert redis_allocator_env({"MALLOC_CONF": "narenas:2"}) == {}
    assert redis_allocator_env({}) == {
        "MALLOC_CONF": f"dirty_decay_ms:{REDIS_DIRTY_DECAY_MS},muzzy_decay_ms:0"
    }


def test_a_redis_server_started_with_it_runs_with_that_decay() -> None:
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_CONF"}
    server = RedisServer(env={**env, **redis_allocator_env(env)})
    server.start()
    try:
        client = redis.Redis.from_url(server.url, decode_responses=True)
        if not str(client.info("memory")["mem_allocator"]).startswith("jemalloc"):
            pytest.skip("this redis-server is not built with jemalloc")
        stats = str(client.execute_command("MEMORY MALLOC-STATS"))  # type: ignore[no-untyped-call]
        client.close()
    finally:
        server.stop()
    assert f"opt.dirty_decay_ms: {REDIS_DIRTY_DECAY_MS}" in stats
    assert "opt.muzzy_decay_ms: 0" in stats
