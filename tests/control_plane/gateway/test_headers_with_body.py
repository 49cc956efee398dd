"""An answer's headers reach the socket in one write with the bytes that follow them in the
same loop turn, in order, before a close; every other write goes straight through; and
uvicorn serving through `HeadersWithBodyProtocol` answers plain and streamed requests as
before (the gateway's own tests serve through it too)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import aiohttp

from control_plane.gateway.headers_with_body import HeadersWithBody, HeadersWithBodyProtocol
from tests.support.asgi_server import serving

START = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n"


class Received(asyncio.Protocol):
    """The server's side: every byte the socket delivered, and when the peer closed."""

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
        self.writes.append(bytes(data))
        self.transport.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.transport, name)


@contextlib.asynccontextmanager
async def connection() -> AsyncIterator[tuple[HeadersWithBody, Counted, Received]]:
    loop = asyncio.get_running_loop()
    server_side = Received()
    server = await loop.create_server(lambda: server_side, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    transport, _ = await loop.create_connection(asyncio.Protocol, "127.0.0.1", port)
    counted = Counted(transport)
    try:
        yield HeadersWithBody(counted, loop), counted, server_side  # type: ignore[arg-type]
    finally:
        transport.close()
        server.close()
        await server.wait_closed()


async def _arrived(side: Received, n: int) -> None:
    async with asyncio.timeout(5):
        while len(side.data) < n:
            side.more.clear()
            await side.more.wait()


async def test_the_headers_go_in_one_write_with_what_follows_them() -> None:
    async with connection() as (writer, counted, side):
        writer.write(START)
        assert counted.writes == []  # held
        writer.write(b"")
        writer.write(memoryview(b"data: 1\n\n"))
        assert counted.writes == [START + b"data: 1\n\n"]  # joined, at once
        writer.writelines([b"data: 2\n\n", bytearray(b"data: 3\n\n")])
        assert counted.writes[1:] == [b"data: 2\n\n", b"data: 3\n\n"]  # straight through
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert len(counted.writes) == 3  # the scheduled flush found nothing held
        await _arrived(side, len(START) + 27)
        assert bytes(side.data) == START + b"data: 1\n\ndata: 2\n\ndata: 3\n\n"


async def test_headers_alone_are_sent_when_the_turn_ends() -> None:
    async with connection() as (writer, counted, side):
        writer.write(START)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert counted.writes == [START]
        writer.write(b"data: 1\n\n")  # a later turn: a write of its own
        await _arrived(side, len(START) + 9)
        assert counted.writes == [START, b"data: 1\n\n"]


async def test_close_sends_held_headers_first_and_abort_drops_them() -> None:
    async with connection() as (writer, counted, side):
        writer.write(START)
        writer.close()
        async with asyncio.timeout(5):
            await side.closed.wait()
        assert bytes(side.data) == START
        writer.write(START)  # after the close: dropped when its turn ends
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert counted.writes == [START]
    async with connection() as (writer, counted, side):
        writer.write(START)
        writer.abort()
        async with asyncio.timeout(5):
            await side.closed.wait()
        await asyncio.sleep(0)
        assert counted.writes == [] and bytes(side.data) == b""


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
    async with (
        serving(app, http=HeadersWithBodyProtocol) as url,
        aiohttp.ClientSession() as session,
    ):
        for _ in range(2):  # a kept-alive connection, answered twice
            async with session.get(f"{url}/plain") as resp:
                assert resp.status == 200 and await resp.read() == b'{"ok":true}'
        async with session.get(f"{url}/stream") as resp:
            pieces = [line async for line in resp.content if line.strip()]
            assert pieces == [b"data: 0\n", b"data: 1\n", b"data: 2\n"]
