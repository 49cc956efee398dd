"""The pipelined script connection (`control_plane.state.mux`) against a real redis-server."""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from collections.abc import AsyncIterator, Iterator

import pytest
import redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import DataError, NoScriptError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from control_plane.state import KeySpace, StateStores, connect
from control_plane.state.client import MuxRedis, _StallAwareRetry
from control_plane.state.mux import Multiplexer
from tests.support.redis_server import RedisServer

INCR = "return redis.call('incrby', KEYS[1], ARGV[1])"


def _mux(url: str, timeout_s: float = 2.0, name: str | None = None) -> Multiplexer:
    return Multiplexer(
        url,
        retry=Retry(NoBackoff(), 0),
        client_name=name,
        connect_timeout_s=1.0,
        socket_timeout_s=timeout_s,
    )


@pytest.fixture
async def mux(redis_url: str) -> AsyncIterator[Multiplexer]:
    m = _mux(redis_url)
    yield m
    await m.aclose()


def _sha(url: str) -> str:
    return str(redis.Redis.from_url(url).script_load(INCR))


async def test_concurrent_callers_each_get_their_own_reply(
    mux: Multiplexer, redis_url: str
) -> None:
    sha = _sha(redis_url)
    replies = await asyncio.gather(
        *(mux.execute("EVALSHA", sha, 1, f"k{i}", i) for i in range(300))
    )
    assert replies == list(range(300))
    assert await mux.execute("GET", "k7") == "7"  # decoded to str, as the pooled client does


async def test_error_replies_raise_redis_py_exceptions_and_the_connection_goes_on(
    mux: Multiplexer,
) -> None:
    with pytest.raises(NoScriptError):
        await mux.execute("EVALSHA", "0" * 40, 0)
    await mux.execute("SET", "s", "x")
    with pytest.raises(ResponseError, match="WRONGTYPE"):
        await mux.execute("LPUSH", "s", 1)
    assert await mux.execute("GET", "s") == "x"


async def test_a_cancelled_caller_leaves_the_replies_in_order(
    mux: Multiplexer, redis_url: str
) -> None:
    await mux.execute("SET", "a", "1")
    first = asyncio.ensure_future(mux.execute("GET", "a"))
    await asyncio.sleep(0)  # written, not yet answered
    first.cancel()
    assert await mux.execute("ECHO", "second") == "second"


async def test_an_unanswered_command_times_out_fails_all_waiting_and_is_not_retried(
    redis_url: str,
) -> None:
    m = Multiplexer(
        redis_url,
        retry=_StallAwareRetry(NoBackoff(), 3),  # as `connect` wires it: 4× the wait if retried
        client_name=None,
        connect_timeout_s=1.0,
        socket_timeout_s=0.3,
    )
    await m.execute("PING")
    pauser = redis.Redis.from_url(redis_url)
    pauser.execute_command("CLIENT", "PAUSE", 1500, "ALL")
    try:
        start = time.monotonic()
        results = await asyncio.gather(
            m.execute("SET", "p", 1), m.execute("GET", "p"), return_exceptions=True
        )
        waited = time.monotonic() - start
    finally:
        pauser.execute_command("CLIENT", "UNPAUSE")
        pauser.close()
    assert all(isinstance(r, RedisTimeoutError) for r in results), results
    assert waited < 1.0
    assert await m.execute("ECHO", "back") == "back"  # a new connection
    await m.aclose()


async def test_redis_restarting_is_absorbed_by_a_retry_on_a_new_connection(
    redis_server: RedisServer, redis_url: str
) -> None:
    m = Multiplexer(
        redis_url,
        retry=Retry(NoBackoff(), 2),
        client_name=None,
        connect_timeout_s=1.0,
        socket_timeout_s=2.0,
    )
    assert await m.execute("PING") == "PONG"
    redis_server.stop()
    redis_server.start()
    assert await m.execute("PING") == "PONG"
    await m.aclose()


async def test_database_and_client_name_come_from_the_url(redis_url: str) -> None:
    url = redis_url.rsplit("/", 1)[0] + "/3"
    m = _mux(url, name="mux-test")
    await m.execute("SET", "where", "three")
    assert await m.execute("CLIENT", "GETNAME") == "mux-test"
    await m.aclose()
    assert redis.Redis.from_url(url).get("where") == b"three"


async def test_connect_multiplexes_scripts_unless_told_not_to(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pooled = connect(redis_url, multiplex=False)
    assert not isinstance(pooled, MuxRedis)
    await pooled.aclose()
    client = connect(redis_url)
    assert isinstance(client, MuxRedis) and client.mux is not None

    async def no_pool(*args: object) -> None:
        raise AssertionError("a script went through the pool")

    monkeypatch.setattr(client, "evalsha", no_pool)
    await client.script_flush()
    stores = StateStores.build(client, KeySpace("t"))
    # NOSCRIPT on the multiplexed connection: loaded, then called again, transparently
    assert (await stores.rate_limiter.allow("a", 1.0, 1.0, 1_700_000_000.0))[0]
    await client.aclose()


@pytest.fixture
def unix_server() -> Iterator[RedisServer]:
    path = os.path.join(tempfile.mkdtemp(prefix="arb-sock-"), "redis.sock")
    server = RedisServer(args=["--unixsocket", path, "--unixsocketperm", "700"])
    server.start()
    yield server
    server.stop()


async def test_a_unix_socket_url_works_pooled_and_multiplexed(unix_server: RedisServer) -> None:
    path = unix_server.args[1]
    client = connect(f"unix://{path}?db=2")
    await client.set("k", "v")  # pooled (no TCP keep-alive option on a Unix socket)
    assert isinstance(client, MuxRedis) and client.mux is not None
    assert await client.mux.execute("GET", "k") == "v"
    await client.aclose()


async def test_a_pipeline_goes_in_one_write_and_answers_in_order(mux: Multiplexer) -> None:
    assert await mux.execute_many([("SET", "x", 1), ("INCR", "x"), ("GET", "x")]) == [
        "OK",
        2,
        "2",
    ]
    with pytest.raises(ResponseError, match="WRONGTYPE"):
        await mux.execute_many([("SET", "y", "a"), ("LPUSH", "y", 1), ("SET", "z", "b")])
    assert await mux.execute_many([("GET", "y"), ("GET", "z")]) == ["a", "b"]  # not atomic


async def test_an_argument_redis_py_would_refuse_fails_alone_and_shifts_no_reply(
    mux: Multiplexer,
) -> None:
    await mux.execute("SET", "a", "A")
    for bad in (None, True, "\ud800"):
        with pytest.raises(DataError):
            await mux.execute("SET", "x", bad)  # type: ignore[arg-type]
    assert await mux.execute("GET", "a") == "A"
    assert await mux.execute("EXISTS", "x") == 0


async def test_a_reply_not_in_utf8_is_decoded_with_replacement_characters(
    mux: Multiplexer, redis_url: str
) -> None:
    """Bytes only a hand edit puts in Redis: decoded, so they fail no reply (an events batch
    holding them would fail every time it is read) and shift no other caller's reply."""
    raw = redis.Redis.from_url(redis_url)
    raw.set("bin", b"\xff\xfeok")
    sha = str(raw.script_load(INCR))
    raw.close()
    results = await asyncio.gather(
        mux.execute("GET", "bin"), mux.execute("EVALSHA", sha, 1, "n", 1), return_exceptions=True
    )
    assert results == ["\ufffd\ufffdok", 1]
    assert await mux.execute("GET", "n") == "1"  # the script ran once: nothing was retried


async def test_callers_waiting_for_a_stalled_connect_share_one_attempt() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(30)  # accepts, never answers: a stalled Redis

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    m = Multiplexer(
        f"redis://127.0.0.1:{port}/0",
        retry=_StallAwareRetry(NoBackoff(), 2),
        client_name="named",  # set-up commands that are never answered
        connect_timeout_s=0.3,
        socket_timeout_s=0.3,
    )
    start = time.monotonic()
    results = await asyncio.gather(*(m.execute("PING") for _ in range(5)), return_exceptions=True)
    waited = time.monotonic() - start
    server.close()
    assert all(isinstance(r, RedisTimeoutError) for r in results), results
    assert waited < 0.9  # one set-up timeout for all five, not one per caller queued before


async def test_a_closed_multiplexer_refuses_commands_at_once(redis_url: str) -> None:
    m = _mux(redis_url)
    assert await m.execute("PING") == "PONG"
    await m.aclose()
    with pytest.raises(RedisConnectionError, match="closed"):
        await m.execute("PING")


@pytest.mark.parametrize("multiplex", [True, False])
async def test_a_command_whose_text_is_not_encodable_raises_and_writes_nothing(
    redis_url: str, multiplex: bool
) -> None:
    """Replies are decoded leniently, commands strictly: a lone surrogate sent as `?` would
    make two different texts one key."""
    client = connect(redis_url, client_name="strict-writes", multiplex=multiplex)
    try:
        with pytest.raises(UnicodeEncodeError):
            await client.set("k", "a\ud800b")
        assert await client.get("k") is None
    finally:
        await client.aclose()
