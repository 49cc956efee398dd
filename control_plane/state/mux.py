"""One pipelined Redis connection for the hot, non-blocking commands (the Lua scripts).

A command sent through redis-py's pool costs ~110 µs of client CPU (pool checkout and
release, retry wrapper, packing; measured on a 2-core box) against ~40 µs for writing the
packed command on an open connection and matching the reply as it comes back. The gateway
runs two scripts per request and the leader several more, so the hot scripts go through
`Multiplexer`: one connection shared by every caller of a process, commands written as they
come (pipelined, never waiting for each other), replies matched in order.

Only commands that never block may use it (a `BLOCK` read would hold up every reply behind
it), and only where nothing needs a connection of its own (`WAIT` after a write). A
`MULTI` … `EXEC` may, as one `execute_many`: its commands go out in one write, so no other
caller's command can fall inside the transaction (`Completions`).
"""

from __future__ import annotations

import asyncio
import socket
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, cast

import hiredis
from redis._parsers.base import BaseParser
from redis.asyncio.connection import parse_url
from redis.asyncio.retry import Retry
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import DataError
from redis.exceptions import TimeoutError as RedisTimeoutError

Arg = str | int | float
ENCODING_ERRORS = "replace"
"""How replies that are not UTF-8 are decoded, by this connection and the pooled client's:
into U+FFFD, never an error (`control_plane.state.client.connect`)."""


class Multiplexer:
    """Sends commands on one connection and hands each caller its own reply.

    Rule: replies come back in the order commands were written, so each caller's future is
    queued as its command is written and resolved by the next reply. Guarantees, the same
    as the pooled client's (`control_plane.state.client.connect`): a refused or reset
    connection and a connect timeout are retried by `retry` (a new connection each time); a
    command not answered within `socket_timeout_s` fails at once with `TimeoutError` and is
    never retried — the connection is dropped, failing every command still waiting on it
    (Redis stalled for all of them alike). Error replies raise redis-py's exceptions
    (`NoScriptError`, `ResponseError`, …); an argument redis-py would refuse raises
    `DataError` before anything is written (text that is not encodable too), a reply that is
    not UTF-8 is decoded with U+FFFD (`ENCODING_ERRORS`), and one that still cannot be parsed
    fails only its own caller, so no reply ever reaches the wrong caller. A caller cancelled
    while waiting leaves its reply to be read and dropped. Callers that find no open
    connection share one connection attempt. No I/O happens before the first command.
    """

    def __init__(
        self,
        url: str,
        *,
        retry: Retry,
        client_name: str | None,
        connect_timeout_s: float,
        socket_timeout_s: float,
    ) -> None:
        self._options = parse_url(url)
        self._retry = retry
        self._client_name = client_name
        self._connect_timeout_s = connect_timeout_s
        self._socket_timeout_s = socket_timeout_s
        self._conn: _Connection | None = None
        self._opening: asyncio.Task[_Connection] | None = None
        """The one connection attempt in progress, which every caller that needs it awaits."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False

    async def execute(self, *args: Arg) -> Any:
        """Send one command; its reply (decoded to `str`), or the error it raised."""
        self._check_open()
        return await self._retry.call_with_retry(lambda: self._once(args), self._failed)

    async def execute_many(self, commands: Sequence[tuple[Arg, ...]]) -> list[Any]:
        """Send `commands` in one write (a pipeline, not a transaction); their replies in
        order. Once all are in, the first error reply (in command order) raises."""
        self._check_open()
        return await self._retry.call_with_retry(lambda: self._many(commands), self._failed)

    def _check_open(self) -> None:
        if self._closed:
            raise RedisConnectionError("client closed")  # outside the retry: not retried

    async def _once(self, args: tuple[Arg, ...]) -> Any:
        return await (await self._ready()).send(args)

    async def _many(self, commands: Sequence[tuple[Arg, ...]]) -> list[Any]:
        futures = (await self._ready()).send_many(commands)
        replies = await asyncio.gather(*futures, return_exceptions=True)
        return _raise_first(replies)

    async def _ready(self) -> _Connection:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # a new event loop (tests): the old connection is unusable
            self._conn, self._opening, self._loop = None, None, loop
        conn = self._conn
        if conn is not None and not conn.closed:
            return conn
        if self._opening is None:
            # one attempt for every caller: a stalled Redis costs each of them one timeout,
            # not one per caller queued ahead of it
            self._opening = loop.create_task(self._open(loop))
            self._opening.add_done_callback(self._opened)
        return await asyncio.shield(self._opening)

    def _opened(self, task: asyncio.Task[_Connection]) -> None:
        if self._opening is task:
            self._opening = None
        if task.cancelled() or task.exception() is not None:
            return
        conn = task.result()
        if self._closed:
            conn.close(RedisConnectionError("client closed"))
        else:
            self._conn = conn

    async def _failed(self, error: Exception) -> None:
        conn = self._conn
        if conn is not None and conn.closed:  # the failed one (a timeout or loss closes it)
            self._conn = None

    async def _open(self, loop: asyncio.AbstractEventLoop) -> _Connection:
        opts = self._options
        conn = _Connection(self._socket_timeout_s)
        where = opts.get("path") or f"{opts.get('host', 'localhost')}:{opts.get('port', 6379)}"
        try:
            async with asyncio.timeout(self._connect_timeout_s):
                if "path" in opts:
                    await loop.create_unix_connection(lambda: conn, opts["path"])
                else:
                    await loop.create_connection(
                        lambda: conn, opts.get("host", "localhost"), opts.get("port", 6379)
                    )
        except TimeoutError as exc:
            raise RedisTimeoutError(f"Timeout connecting to {where}") from exc
        except OSError as exc:
            raise RedisConnectionError(f"Error connecting to {where}: {exc}") from exc
        await self._hello(conn)
        return conn

    async def _hello(self, conn: _Connection) -> None:
        """Credentials, database and name, as redis-py's connection would send them; a
        failure closes the connection and raises as redis-py's set-up would."""
        opts = self._options
        password, username = opts.get("password"), opts.get("username")
        setup: list[tuple[Arg, ...]] = []
        if password:
            setup.append(("AUTH", username, password) if username else ("AUTH", password))
        if int(opts.get("db") or 0):
            setup.append(("SELECT", int(opts["db"])))
        if self._client_name:
            setup.append(("CLIENT", "SETNAME", self._client_name))
        if not setup:
            return
        try:
            _raise_first(await asyncio.gather(*conn.send_many(setup), return_exceptions=True))
        except BaseException as exc:
            conn.close(RedisConnectionError(f"connection set-up failed: {exc}"))
            raise

    async def aclose(self) -> None:
        """Close the connection (commands still waiting on it fail) and refuse new ones."""
        self._closed = True
        conn, self._conn = self._conn, None
        if conn is not None and self._loop is asyncio.get_running_loop():
            conn.close(RedisConnectionError("client closed"))


class _Connection(asyncio.Protocol):
    """The transport, the reply parser and the futures of the commands written, in order."""

    def __init__(self, timeout_s: float) -> None:
        self._reader = hiredis.Reader(
            encoding="utf-8", errors=ENCODING_ERRORS, replyError=BaseParser.parse_error
        )
        self._waiting: deque[tuple[asyncio.Future[Any], asyncio.TimerHandle]] = deque()
        self._timeout_s = timeout_s
        self._transport: asyncio.Transport | None = None
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's does not subclass it
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)

    def send(self, args: tuple[Arg, ...]) -> asyncio.Future[Any]:
        return self.send_many((args,))[0]

    def send_many(self, commands: Sequence[tuple[Arg, ...]]) -> list[asyncio.Future[Any]]:
        """Write `commands`; a future per reply. Nothing is queued unless all are written."""
        if self.closed or self._transport is None:
            raise RedisConnectionError("Connection closed.")
        try:
            # hiredis types its argument as a 1-tuple
            packed = [hiredis.pack_command(args) for args in commands]  # type: ignore[arg-type]
        except (TypeError, ValueError) as exc:  # as redis-py's encoder refuses None, bool, …
            raise DataError(f"cannot send {commands!r}: {exc}") from exc
        loop = asyncio.get_running_loop()
        futures: list[asyncio.Future[Any]] = []
        for _ in commands:
            fut: asyncio.Future[Any] = loop.create_future()
            self._waiting.append((fut, loop.call_later(self._timeout_s, self._timed_out, fut)))
            futures.append(fut)
        self._transport.write(packed[0] if len(packed) == 1 else b"".join(packed))
        return futures

    def data_received(self, data: bytes) -> None:
        reader = self._reader
        reader.feed(data)
        waiting = self._waiting
        while True:
            try:
                reply = reader.gets()
            except hiredis.ProtocolError as exc:
                self.close(RedisConnectionError(f"Protocol error: {exc}"))
                return
            except ValueError as exc:  # not expected with ENCODING_ERRORS: its caller's error
                reply = exc
            if reply is False:
                return
            if not waiting:
                self.close(RedisConnectionError("a reply no command asked for"))
                return
            fut, timer = waiting.popleft()
            timer.cancel()
            if fut.done():
                continue  # its caller was cancelled
            if isinstance(reply, Exception):
                fut.set_exception(reply)
            else:
                fut.set_result(reply)

    def _timed_out(self, fut: asyncio.Future[Any]) -> None:
        if not fut.done():
            self.close(RedisTimeoutError("Timeout reading from socket"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.close(RedisConnectionError(f"Connection closed by server: {exc or 'EOF'}"))

    def close(self, error: Exception) -> None:
        """Fail every command still waiting with `error` (each its own copy) and close."""
        if self.closed:
            return
        self.closed = True
        if self._transport is not None:
            self._transport.close()
        while self._waiting:
            fut, timer = self._waiting.popleft()
            timer.cancel()
            if not fut.done():
                fut.set_exception(_copy(error))


def _copy(error: Exception) -> Exception:
    make: Callable[..., Exception] = type(error)
    return make(*error.args)


def _raise_first(replies: list[Any]) -> list[Any]:
    """`replies`, unless one is an error: then the first of them is raised (every reply has
    been awaited, so no error is left unretrieved)."""
    for reply in replies:
        if isinstance(reply, BaseException):
            raise reply
    return replies
