"""A connection's writes of one loop turn reach the socket as one write, in order, before a
close; and uvicorn serving through `TurnWritesProtocol` answers plain and streamed requests
exactly as before (the gateway's own tests serve through it too)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from control_plane.gateway import turn_writes
from control_plane.gateway.turn_writes import TurnWriter, TurnWritesProtocol
from tests.support.asgi_server import serving


class Received(asyncio.Protocol):
    """The server's side: every chunk the socket delivered, and when the peer closed."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.more = asyncio.Event()
        self.closed = asyncio.Event()

    def data_received(self, data: bytes) -> None:
        self.data += data
        self.more.set()

    def eof_received(self) -> bool:
        self.closed.set()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed.set()


class Counted:
    """A real transport whose `write` calls are counted (everything else is its own)."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.writes.append(data)
        self.transport.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.transport, name)


@contextlib.asynccontextmanager
async def connection() -> AsyncIterator[tuple[TurnWriter, Counted, Received]]:
    loop = asyncio.get_running_loop()
    server_side = Received()
    server = await loop.create_server(lambda: server_side, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    transport, _ = await loop.create_connection(asyncio.Protocol, "127.0.0.1", port)
    counted = Counted(transport)
    try:
        yield TurnWriter(counted, loop), counted, server_side  # type: ignore[arg-type]
    finally:
        transport.close()
        server.close()
        await server.wait_closed()


async def _arrived(side: Received, n: int) -> None:
    async with asyncio.timeout(5):
        while len(side.data) < n:
            side.more.clear()
            await side.more.wait()


async def test_the_writes_of_one_turn_are_one_write_in_order() -> None:
    async with connection() as (writer, counted, side):
        writer.write(b"HTTP/1.1 200 OK\r\n\r\n")
        writer.write(b"")
        writer.writelines([memoryview(b"data: 1\n\n"), bytearray(b"data: 2\n\n")])
        assert counted.writes == []  # nothing before the turn ends
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert counted.writes == [b"HTTP/1.1 200 OK\r\n\r\ndata: 1\n\ndata: 2\n\n"]
        writer.write(b"data: 3\n\n")  # a later turn: a write of its own
        await _arrived(side, len(counted.writes[0]) + 9)
        assert counted.writes[1:] == [b"data: 3\n\n"]
        assert bytes(side.data) == b"HTTP/1.1 200 OK\r\n\r\ndata: 1\n\ndata: 2\n\ndata: 3\n\n"


async def test_close_sends_what_the_turn_wrote_first_and_abort_drops_it() -> None:
    async with connection() as (writer, counted, side):
        writer.write(b"last words")
        writer.close()
        async with asyncio.timeout(5):
            await side.closed.wait()
        assert bytes(side.data) == b"last words"
        writer.write(b"after close")
        await asyncio.sleep(0)
        assert counted.writes == [b"last words"]  # nothing written to a closing transport
    async with connection() as (writer, counted, side):
        writer.write(b"never sent")
        writer.abort()
        async with asyncio.timeout(5):
            await side.closed.wait()
        await asyncio.sleep(0)
        assert counted.writes == [] and bytes(side.data) == b""


async def test_a_turn_that_writes_too_much_is_flushed_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(turn_writes, "FLUSH_AT_BYTES", 10)
    async with connection() as (writer, counted, side):
        writer.write(b"12345")
        assert counted.writes == []
        writer.write(b"678901")
        assert counted.writes == [b"12345678901"]  # over the limit: at once
        writer.write(b"x")
        await _arrived(side, 12)
        assert counted.writes == [b"12345678901", b"x"]


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """A plain answer, or a stream of three pieces with a pause between them."""
    if scope["type"] != "http":
        return
    if scope["path"] == "/plain":
        headers = [(b"content-type", b"application/json"), (b"content-length", b"11")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b'{"ok":true}'})
        return
    await send({"type": "http.response.start", "status": 200, "headers": []})
    for i in range(3):
        await send({"type": "http.response.body", "body": b"data: %d\n\n" % i, "more_body": True})
        await asyncio.sleep(0.01)
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def test_uvicorn_serves_plain_and_streamed_answers_through_the_protocol() -> None:
    async with serving(app, http=TurnWritesProtocol) as url, aiohttp.ClientSession() as session:
        for _ in range(2):  # a kept-alive connection, answered twice
            async with session.get(f"{url}/plain") as resp:
                assert resp.status == 200 and await resp.read() == b'{"ok":true}'
        async with session.get(f"{url}/stream") as resp:
            pieces = [line async for line in resp.content if line.strip()]
            assert pieces == [b"data: 0\n", b"data: 1\n", b"data: 2\n"]
