"""`arbiter up`'s private Redis counts as started only when the server answering on its port is
its own child: another server that holds the port is refused, never used."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from control_plane.up.deploy import UpError, UpOptions, _redis_child, _wait_redis
from tests.support.ports import free_port
from tests.support.redis_server import RedisServer


def test_its_own_redis_is_waited_for(tmp_path: Path) -> None:
    port = free_port()
    child = _redis_child(UpOptions(state_dir=tmp_path), port)
    child.start()
    try:
        _wait_redis(f"redis://127.0.0.1:{port}/0", child)
        assert child.alive()
    finally:
        child.stop()


def _refused(tmp_path: Path, other: RedisServer, match: str) -> None:
    """`arbiter up`'s Redis child, started on the port `other` holds, is refused."""
    child = _redis_child(UpOptions(state_dir=tmp_path), other.port)
    child.start()
    try:
        with pytest.raises(UpError, match=match):
            _wait_redis(other.url, child)
    finally:
        child.stop()


def test_a_port_held_by_another_redis_is_refused(tmp_path: Path, redis_server: RedisServer) -> None:
    _refused(tmp_path, redis_server, r"answered by another Redis \(pid \d+\)")


def test_a_port_held_by_a_redis_that_will_not_say_its_pid_is_refused(tmp_path: Path) -> None:
    """An ACL (or a renamed command) makes `INFO` fail: that server is not ours either, and
    the refusal says so instead of ending in a traceback."""
    other = RedisServer()
    other.start()
    try:
        client = redis.Redis.from_url(other.url)
        client.execute_command("ACL", "SETUSER", "default", "-info")
        client.close()
        _refused(tmp_path, other, r"another Redis \(pid one that will not say\)")
    finally:
        other.stop()
