"""Minimal raw-ASGI plumbing for the simulated worker (no framework on the token hot path)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import orjson

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

JSON = b"application/json"
SSE = b"text/event-stream; charset=utf-8"
PROMETHEUS = b"text/plain; version=0.0.4; charset=utf-8"


class ClientGoneError(Exception):
    """The client disconnected before its request body was read."""


async def read_body(receive: Receive) -> bytes:
    """The whole request body."""
    chunks: list[bytes] = []
    while True:
        msg = await receive()
        if msg["type"] == "http.disconnect":
            raise ClientGoneError
        chunks.append(msg.get("body", b""))
        if not msg.get("more_body", False):
            return b"".join(chunks)


def header(scope: Scope, name: bytes) -> str | None:
    """A request header (``name`` lower-case), decoded as latin-1."""
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value).decode("latin-1")
    return None


VARY = (b"vary", b"Origin")  # vLLM's CORS middleware adds it to every response


async def send_bytes(send: Send, status: int, body: bytes, content_type: bytes | None) -> None:
    """A complete response with a body (no content-type header when ``content_type`` is None)."""
    headers = [(b"content-length", str(len(body)).encode()), VARY]
    if content_type is not None:
        headers.append((b"content-type", content_type))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def send_json(send: Send, obj: Any, status: int = 200) -> None:
    """A JSON response."""
    await send_bytes(send, status, orjson.dumps(obj), JSON)


async def start_stream(send: Send) -> None:
    """Response head of a server-sent-events stream (chunked transfer)."""
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", SSE)]})


async def wait_disconnect(receive: Receive, on_gone: Callable[[], object]) -> None:
    """Call ``on_gone`` when the client disconnects (run as a task; cancel it when done)."""
    while True:
        msg = await receive()
        if msg["type"] == "http.disconnect":
            on_gone()
            return
