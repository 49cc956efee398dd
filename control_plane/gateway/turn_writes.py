"""A client connection's writes of one event-loop turn, sent to the socket as one.

uvloop hands every `transport.write` to the kernel at once, so an answer's headers and its
first bytes, written in the same turn, cost two `write` calls — and wake the client twice. The
gateway's HTTP protocol (`TurnWritesProtocol`, uvicorn's httptools protocol otherwise
unchanged) sees its connection through a `TurnWriter`, which gathers what is written during a
turn and writes it once, at the start of the next turn.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

FLUSH_AT_BYTES = 256 * 1024
"""A turn that writes more than this is flushed at once (the buffer stays bounded)."""


class TurnWriter:
    """An `asyncio.Transport` whose writes of one loop turn reach the real one as one write.

    Rule: `write` appends to the turn's buffer; the first write of a turn schedules one flush
    (`call_soon`, so it runs before the loop next waits for I/O), which writes the buffer with
    a single `write` of the real transport. Everything else is the real transport's.
    Guarantee: bytes reach the real transport in the order written, no later than the next
    loop turn, and before the connection is closed (`close` flushes first; `abort` drops them,
    as the real transport's abort drops its own buffer); nothing is written to a transport
    that is closing.
    """

    __slots__ = ("_buffer", "_loop", "_size", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._buffer: list[bytes] = []
        self._size = 0

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        if not self._buffer:
            self._loop.call_soon(self.flush)
        self._buffer.append(bytes(data))
        self._size += len(data)
        if self._size > FLUSH_AT_BYTES:
            self.flush()

    def writelines(self, lines: Any) -> None:
        for data in lines:
            self.write(data)

    def flush(self) -> None:
        """Write what this turn gathered (nothing when already flushed)."""
        if not self._buffer:
            return
        data = self._buffer[0] if len(self._buffer) == 1 else b"".join(self._buffer)
        self._buffer.clear()
        self._size = 0
        if not self._transport.is_closing():
            self._transport.write(data)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def abort(self) -> None:
        self._buffer.clear()
        self._size = 0
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class TurnWritesProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, writing each loop turn's bytes at once (`TurnWriter`)."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(TurnWriter(transport, self.loop))  # type: ignore[arg-type]
