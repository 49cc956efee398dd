"""`arbiter up`'s private Redis counts as started only when the server answering on its port is
its own child: another server that holds the port is refused, never used."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
import redis

from control_plane.up.errors import UpError
from control_plane.up.redis_child import redis_child, redis_url, wait_redis
from tests.support.ports import free_port
from tests.support.redis_server import RedisServer


def test_its_own_redis_is_waited_for(tmp_path: Path) -> None:
    port = free_port()
    child = redis_child(tmp_path, port, "everysec", "pass word/?")
    child.start()
    try:
        wait_redis(redis_url(port, "pass word/?"), child)
        assert child.alive()
    finally:
        child.stop()


def _refused(tmp_path: Path, other: RedisServer, match: str) -> None:
    """`arbiter up`'s Redis child, started on the port `other` holds, is refused."""
    child = redis_child(tmp_path, other.port, "everysec")
    child.start()
    try:
        with pytest.raises(UpError, match=match):
            wait_redis(other.url, child)
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


def test_a_redis_that_refuses_our_password_is_another_one(tmp_path: Path) -> None:
    """Our own server takes the password we gave it; one with another password refuses it (a
    server without any is told apart by its pid, as above). The refusal does not print the
    password."""
    other = RedisServer()
    other.start()
    try:
        client = redis.Redis.from_url(other.url)
        client.config_set("requirepass", "theirs")
        client.close()
        child = redis_child(tmp_path, other.port, "everysec", "ours")
        child.start()
        try:
            with pytest.raises(UpError, match=r"another Redis \(pid one that will not say\)") as e:
                wait_redis(redis_url(other.port, "ours"), child)
            assert "ours" not in str(e.value)
        finally:
            child.stop()
    finally:
        other.stop()


def test_the_private_redis_requires_its_password_and_never_shows_it(tmp_path: Path) -> None:
    port, password = free_port(), "s3cret-for-this-run"
    child = redis_child(tmp_path, port, "everysec", password)
    child.start()
    try:
        wait_redis(redis_url(port, password), child)
        assert child.proc is not None
        assert all(password not in arg for arg in child.argv)  # argv is readable by all users
        conf = tmp_path / "redis" / "redis.conf"
        assert stat.S_IMODE(conf.stat().st_mode) == 0o600
        stranger = redis.Redis(port=port)
        with pytest.raises(redis.AuthenticationError):
            stranger.set("arbiter:anything", "x")
        stranger.close()
    finally:
        child.stop()
