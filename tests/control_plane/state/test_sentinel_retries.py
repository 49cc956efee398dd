"""Sentinel discovery asks each Sentinel once: a dead one costs one try, then the next is asked
(redis-py's default would try it 11 times, with backoff, on every new data connection)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import cast

import pytest
import redis

from control_plane.state import StateUnavailable, connect
from control_plane.state.client import ping
from control_plane.state.sentinel import SentinelTarget
from tests.support.ports import free_port
from tests.support.redis_server import RedisServer
from tests.support.sentinel import SERVICE, sentinel_command


class DeadSentinel:
    """A TCP listener that accepts each connection and closes it at once, counting them."""

    def __init__(self) -> None:
        self.accepted = 0
        self._server: asyncio.Server | None = None

    async def start(self) -> tuple[str, int]:
        self._server = await asyncio.start_server(self._hang_up, "127.0.0.1", 0)
        return "127.0.0.1", int(self._server.sockets[0].getsockname()[1])

    async def _hang_up(self, _reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        writer.close()

    def close(self) -> None:
        if self._server is not None:
            self._server.close()


@pytest.fixture
async def dead() -> AsyncIterator[list[DeadSentinel]]:
    fakes = [DeadSentinel(), DeadSentinel()]
    yield fakes
    for fake in fakes:
        fake.close()


async def test_each_dead_sentinel_is_asked_once_per_discovery(
    dead: list[DeadSentinel], redis_url: str
) -> None:
    await _fail_discovery(dead, redis_url, retries=0)  # one data connect: one discovery
    assert [fake.accepted for fake in dead] == [1, 1]


async def _fail_discovery(dead: list[DeadSentinel], redis_url: str, **options: int) -> None:
    target = SentinelTarget((await dead[0].start(), await dead[1].start()), SERVICE)
    client = connect(redis_url, sentinel=target, **options)
    try:
        with pytest.raises(StateUnavailable, match=r"No master found"):
            await ping(client)
    finally:
        await client.aclose()


@pytest.fixture
def sentinel_port(redis_server: RedisServer, tmp_path: Path) -> Iterator[int]:
    """One real Sentinel (quorum 1) watching the session's redis-server, for this test only."""
    command = sentinel_command()
    if command is None:
        if os.environ.get("CI"):
            pytest.fail("no redis-sentinel or redis-server")
        pytest.skip("no redis-sentinel or redis-server")
    port = free_port()
    conf = tmp_path / "sentinel.conf"  # Sentinel rewrites its own file
    conf.write_text(
        f"port {port}\nbind 127.0.0.1\ndir {tmp_path}\n"
        f"sentinel monitor {SERVICE} 127.0.0.1 {redis_server.port} 1\n"
    )
    proc = subprocess.Popen(
        [command[0], str(conf), *command[1:]],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_names_primary(port, redis_server.port)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _wait_names_primary(port: int, primary_port: int, timeout_s: float = 10) -> None:
    client = redis.Redis(port=port, decode_responses=True)
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            try:
                state = cast(dict[str, object], client.sentinel_master(SERVICE))
                if state["port"] == primary_port:
                    return
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
            if time.monotonic() > deadline:
                raise AssertionError(f"the Sentinel on :{port} never named :{primary_port}")
            time.sleep(0.05)
    finally:
        client.close()


async def test_a_dead_first_sentinel_is_tried_once_then_the_next_names_the_primary(
    dead: list[DeadSentinel], sentinel_port: int, redis_url: str
) -> None:
    target = SentinelTarget((await dead[0].start(), ("127.0.0.1", sentinel_port)), SERVICE)
    client = connect(redis_url, sentinel=target)
    try:
        await client.set("k", "v")
        assert await client.get("k") == "v"
    finally:
        await client.aclose()
    assert dead[0].accepted == 1


async def test_a_failed_discovery_is_not_run_again_by_the_connection_s_retries(
    dead: list[DeadSentinel], redis_url: str
) -> None:
    """With the default `retries` (2) too: before, each retry re-ran the whole discovery, so
    the worst case was three times the number of Sentinels times their timeouts."""
    await _fail_discovery(dead, redis_url)
    assert [fake.accepted for fake in dead] == [1, 1]
