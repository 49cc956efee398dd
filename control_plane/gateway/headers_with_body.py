"""An answer's status line and headers sent with its first bytes, in one write.

uvloop hands every `transport.write` to the kernel at once, so an answer's headers and its
first bytes, written in the same loop turn, cost two `write` calls — and wake the client twice.
The gateway's HTTP protocol (`HeadersWithBodyProtocol`, uvicorn's httptools protocol otherwise
unchanged) writes to its connection through a `HeadersWithBody` transport, which holds the
write that starts a response until the next write of the same turn and sends the two as one.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

RESPONSE_START = b"HTTP/1.1 "
"""How uvicorn's write of a status line and headers begins (it writes them in one call)."""


class HeadersWithBody:
    """An `asyncio.Transport` that sends a response's headers together with what follows.

    Rule: a write that starts a response (`HTTP/1.1 …`: uvicorn writes the status line and the
    headers in one call) is held, and a flush is scheduled (`call_soon`: it runs before the
    loop next waits for I/O); the next write joins it and the two reach the real transport as
    one write. Every other write goes straight through, so a stream's later pieces cost nothing
    more. Everything else is the real transport's.
    Guarantee: bytes reach the real transport in the order written, held ones no later than
    the next loop turn and before the connection is closed (`close` flushes first; `abort`
    drops them, as the real transport's abort drops its own buffer); a held start is dropped
    if the transport is closing by the turn's end.
    """

    __slots__ = ("_held", "_loop", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: bytes | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        if self._held is not None:
            data, self._held = self._held + bytes(data), None
        elif data[: len(RESPONSE_START)] == RESPONSE_START:
            self._held = bytes(data)
            self._loop.call_soon(self.flush)
            return
        self._transport.write(data)

    def writelines(self, lines: Any) -> None:
        for data in lines:
            self.write(data)

    def flush(self) -> None:
        """Write a held response start (nothing when none is held)."""
        held, self._held = self._held, None
        if held is not None and not self._transport.is_closing():
            self._transport.write(held)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def abort(self) -> None:
        self._held = None
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class HeadersWithBodyProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, sending each answer's headers with its first bytes."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(HeadersWithBody(transport, self.loop))  # type: ignore[arg-type]
