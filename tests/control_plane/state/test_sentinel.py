"""Sentinel-aware connections: settings checked at start, the pool follows a real fail-over,
scripts are reloaded on the promoted replica and the fencing token keeps growing."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from control_plane.scheduler.leader import wait_for_lease
from control_plane.settings import SettingsError, load_settings
from control_plane.state import KeySpace, StateStores, connect, sentinel_of
from control_plane.state.scripts import Scripts, script_sha
from control_plane.state.sentinel import BlockingSentinelPool, SentinelTarget
from tests.support.sentinel import SERVICE, SentinelGroup, sentinel_command


def test_bad_sentinel_settings_are_one_line_each(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARBITER_REDIS_SENTINELS", "10.0.0.5:26379, sentinel-b")
    monkeypatch.setenv("ARBITER_REDIS_SENTINEL_SERVICE", "my service")
    with pytest.raises(SettingsError) as caught:
        load_settings()
    assert caught.value.lines == [
        "ARBITER_REDIS_SENTINELS: 'sentinel-b': expected host:port[,host:port…] "
        "(e.g. 10.0.0.5:26379)",
        "ARBITER_REDIS_SENTINEL_SERVICE: expected the Sentinel monitor name (no spaces), "
        "got 'my service'",
    ]


def test_settings_name_the_sentinel_target(monkeypatch: pytest.MonkeyPatch) -> None:
    assert sentinel_of(load_settings()) is None
    monkeypatch.setenv("ARBITER_REDIS_SENTINELS", "10.0.0.5:26379,[::1]:26380")
    monkeypatch.setenv("ARBITER_REDIS_SENTINEL_PASSWORD", "s3cret")
    assert sentinel_of(load_settings()) == SentinelTarget(
        (("10.0.0.5", 26379), ("::1", 26380)), "arbiter", "s3cret"
    )


async def test_sentinel_pool_keeps_the_pool_semantics() -> None:
    target = SentinelTarget((("127.0.0.1", 1),), "arbiter")
    client = connect(
        "redis://:pw@ignored:1/3", sentinel=target, max_connections=7, pool_timeout_s=0.5
    )
    pool = client.connection_pool
    assert isinstance(pool, BlockingSentinelPool)
    assert (pool.max_connections, pool.timeout) == (7, 0.5)
    kwargs = pool.connection_kwargs
    assert (kwargs["db"], kwargs["password"], kwargs["decode_responses"]) == (3, "pw", True)
    assert kwargs["socket_timeout"] == 2.0
    await client.aclose()


@pytest.fixture
def group(tmp_path: Path) -> Iterator[SentinelGroup]:
    if sentinel_command() is None:
        if os.environ.get("CI"):
            pytest.fail("no redis-sentinel or redis-server")
        pytest.skip("no redis-sentinel or redis-server (apt-get install redis-sentinel)")
    g = SentinelGroup(tmp_path)
    try:
        g.start()
        yield g
    finally:
        g.stop()


async def _until(call: object, timeout_s: float = 30) -> object:
    """Await `call()` until it stops raising (the fail-over is under way meanwhile)."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        try:
            return await call()  # type: ignore[operator]
        except Exception:
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.1)


@pytest.mark.slow
async def test_failover_reaches_the_new_primary_with_scripts_and_a_larger_token(
    group: SentinelGroup,
) -> None:
    target = SentinelTarget(tuple(("127.0.0.1", s.port) for s in group.sentinels), SERVICE)
    stores = StateStores.open(group.primary_url, "ha", sentinel=target)
    try:
        assert await stores.lease.acquire("a", 30, 0.0, fresh=True)
        first = stores.lease.token
        assert first == 1 and stores.lease.unconfirmed == 0  # WAIT saw the replica take it
        old = await asyncio.to_thread(group.kill9_primary)
        new = await asyncio.to_thread(group.wait_failover, old)
        # the promoted replica has the lease and the token, but no script in its cache
        assert await _until(lambda: stores.redis.script_exists(script_sha("lease_acquire"))) == [
            False
        ]
        assert await stores.lease.holder() == "a"
        assert await stores.lease.acquire("a", 30, 1.0, fresh=True)  # NOSCRIPT → loaded
        assert stores.lease.token is not None and first is not None
        assert stores.lease.token > first
        info = await stores.redis.info("server")
        assert int(info["tcp_port"]) == new
        assert await Scripts(stores.redis).call("lease_renew", [KeySpace("ha").leader], ["a", 1])
    finally:
        await stores.aclose()


@pytest.mark.slow
async def test_a_connection_open_through_a_fail_over_stops_writing_to_the_old_primary(
    group: SentinelGroup,
) -> None:
    """The old primary is cut off (stopped) while no command is sent, so the pool's connection
    to it stays open; once it answers again it is still a primary until Sentinel demotes it
    (about 10 s). Before, every write in that time went there and was lost."""
    target = SentinelTarget(tuple(("127.0.0.1", s.port) for s in group.sentinels), SERVICE)
    client = connect(group.primary_url, sentinel=target)
    old = group.nodes[0]
    assert old.proc is not None
    try:
        await client.set("before", 1)
        os.kill(old.proc.pid, signal.SIGSTOP)
        try:
            new = await asyncio.to_thread(group.wait_failover, old.port)
        finally:
            os.kill(old.proc.pid, signal.SIGCONT)
        for i in range(10):
            await client.set(f"after:{i}", i)
            await asyncio.sleep(0.2)
        on_new = redis.Redis(port=new, decode_responses=True)
        try:
            landed = [i for i in range(10) if on_new.get(f"after:{i}") is not None]
        finally:
            on_new.close()
        assert set(range(5, 10)) <= set(landed)  # within about a second: the new primary
    finally:
        await client.aclose()


@pytest.mark.slow
async def test_a_deposed_primary_does_not_hand_a_new_leader_s_token_out_again(
    group: SentinelGroup,
) -> None:
    """Leader `a` took token 1; its primary is cut off (stopped), the replica promoted, and `b`
    takes token 2 there. When the old primary answers again (still a primary until Sentinel
    demotes it), `a` asking for a new tenure there got token 2 too: no replica acknowledged it,
    which was only a warning, and `a`'s fenced writes passed on the new primary as `b`'s did."""
    target = SentinelTarget(tuple(("127.0.0.1", s.port) for s in group.sentinels), SERVICE)
    a = StateStores.open(group.primary_url, "ha", sentinel=target)
    b = StateStores.open(group.primary_url, "ha", sentinel=target)
    old = group.nodes[0]
    assert old.proc is not None
    try:
        assert await a.lease.acquire("a", 2, 0.0, fresh=True) and a.lease.token == 1
        os.kill(old.proc.pid, signal.SIGSTOP)
        try:
            await asyncio.to_thread(group.wait_failover, old.port)
            assert await _until(lambda: _taken(b, "b"))  # once a's lease expired there
            assert b.lease.token == 2
        finally:
            os.kill(old.proc.pid, signal.SIGCONT)
        took = await a.lease.acquire("a", 2, 1.0, fresh=True)
        assert (took, a.lease.token) == (False, None)
        assert await b.lease.is_current(2)
    finally:
        await a.aclose()
        await b.aclose()


async def _taken(stores: StateStores, holder: str) -> bool:
    if not await stores.lease.acquire(holder, 2, 0.0, fresh=True):
        raise AssertionError(f"{holder} did not get the lease yet")
    return True


async def test_silent_sentinels_and_a_lost_replica_do_not_stop_a_leader(
    group: SentinelGroup,
) -> None:
    """The replica is down (WAIT falls short) and the Sentinels do not answer (stopped: a
    partition or dead hosts, not refused connections). Asking them whether this primary was
    deposed took 3 × the Sentinel timeout, past the scheduler's bound on an acquire (TTL / 2):
    every acquire was cut there and retried with a new token, and no scheduler ever led.
    Before the Sentinel check a tenure here led with a warning, as documented."""
    target = SentinelTarget(tuple(("127.0.0.1", s.port) for s in group.sentinels), SERVICE)
    stores = StateStores.open(group.primary_url, "ha", sentinel=target)
    pids = [s.proc.pid for s in group.sentinels if s.proc is not None]
    try:
        await stores.redis.ping()  # the primary is known
        group.nodes[1].kill9()  # the replica
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        term = await asyncio.wait_for(wait_for_lease(stores.lease, "a", 2.0), 5)
        assert term.active() and stores.lease.unconfirmed == 1
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
        await stores.aclose()
