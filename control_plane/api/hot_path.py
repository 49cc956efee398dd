"""The two completion routes served as raw ASGI, in front of FastAPI's routing.

`POST /v1/chat/completions` and `POST /v1/completions` are most of a gateway's traffic, and
on its hot path FastAPI's layers (middleware stack, routing, dependency solving, the body read
through `email`'s content-type parser, `StreamingResponse`'s task group) cost about a third of
the gateway's CPU per request (docs/performance.md). `GatewayApp` serves those two routes
itself: it reads the body (under the same byte limit), parses it with orjson, validates it with
the very models the FastAPI routes use, authenticates with the very dependencies
(`bearer`, `current_tenant`), calls the same `Gateway.serve`, and sends its answer directly.

Rule: the fast path only ever serves a request FastAPI would serve the same way. Anything it is
not sure of — a body that is not a JSON object orjson accepts, a content type other than JSON,
a body that fails validation — is handed to FastAPI with the body already read, so every
refusal is produced by the one set of handlers (`gateway.errors`) and keeps its exact shape.
Errors raised after validation (authentication, the door, Redis) are rendered by the same
function the FastAPI handlers use. A client that disconnects while its answer streams is
noticed by a watcher on `receive` that cancels the stream, as `StreamingResponse` did.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import orjson
from fastapi import FastAPI
from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.types import Message, Receive, Scope, Send

from control_plane.api.auth import bearer, current_tenant
from control_plane.api.body_limit import too_large
from control_plane.gateway.errors import error_response
from control_plane.gateway.relay import FinalPiece
from control_plane.gateway.schemas import ChatCompletionRequest, CompletionRequest
from control_plane.gateway.service import Gateway

HOT_ROUTES: dict[str, type[ChatCompletionRequest] | type[CompletionRequest]] = {
    "/v1/chat/completions": ChatCompletionRequest,
    "/v1/completions": CompletionRequest,
}


class GatewayApp(FastAPI):
    """The gateway's FastAPI app, with the two completion routes served by `serve_hot` first.

    Guarantee: every other route, and every completion request the fast path does not take
    (see the module docstring), is FastAPI's as before; the OpenAPI document is unchanged
    (the FastAPI routes stay declared)."""

    max_body_bytes: int = 1 << 20

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            model = HOT_ROUTES.get(scope["path"])
            if model is not None:
                await serve_hot(self, model, scope, receive, send)
                return
        await super().__call__(scope, receive, send)

    async def fallback(self, scope: Scope, receive: Receive, send: Send) -> None:
        """FastAPI's own handling of a request (its routes, middleware and handlers)."""
        await super().__call__(scope, receive, send)


async def serve_hot(
    app: GatewayApp,
    model: type[ChatCompletionRequest] | type[CompletionRequest],
    scope: Scope,
    receive: Receive,
    send: Send,
) -> None:
    """One completion request (see the module docstring)."""
    scope["app"] = app
    raw = await _read_body(scope, receive, app.max_body_bytes)
    if raw is None:
        await too_large(app.max_body_bytes).response()(scope, receive, send)
        return
    body = _validated(model, scope, raw)
    if body is None:
        await app.fallback(scope, _replay(raw, receive), send)
        return
    request = Request(scope, receive)
    try:
        tenant = await current_tenant(request, await bearer(request))
        gateway: Gateway = app.state.gateway
        response = await gateway.serve(request, body, tenant)
    except Exception as exc:  # rendered exactly as the FastAPI handlers render it
        response = error_response(exc, request)
    if isinstance(response, StreamingResponse):
        await _stream(response, receive, send)
    else:
        await response(scope, receive, send)


async def _read_body(scope: Scope, receive: Receive, limit: int) -> bytes | None:
    """The whole body, or None when it is over `limit` bytes (announced or sent)."""
    for name, value in scope["headers"]:
        if name == b"content-length" and value.isdigit() and int(value) > limit:
            return None
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break  # the client left; FastAPI's own read would see the same
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _validated(model: type[BaseModel], scope: Scope, raw: bytes) -> Any:
    """The body as `model`, or None when FastAPI must answer (and word the refusal)."""
    if not _json_content(scope):
        return None
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(data, dict):
        return None
    try:
        return model.model_validate(data)
    except ValidationError:
        return None


def _json_content(scope: Scope) -> bool:
    """Whether the body is declared `application/json` (with or without parameters), which
    FastAPI parses as JSON; any other declaration, or none, is left to FastAPI."""
    for name, value in scope["headers"]:
        if name == b"content-type":
            return bool(value == b"application/json" or value.startswith(b"application/json;"))
    return False


def _replay(raw: bytes, receive: Receive) -> Receive:
    """`receive` with the body already read handed out once more."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": raw, "more_body": False}

    return replayed


async def _stream(response: StreamingResponse, receive: Receive, send: Send) -> None:
    """Send a streamed answer; a client that leaves cancels it (the iterator's own cleanup
    closes the worker's stream and finishes the request as aborted).

    The headers go out with the first piece, in the same loop turn, so the connection
    (`HeadersWithBody`) sends both in one write (one wake-up of the client, not two): the
    client sees the status when its first bytes are ready, not before."""
    task = asyncio.current_task()
    assert task is not None
    state = {"streaming": True, "left": False}

    def on_left(watcher: asyncio.Task[None]) -> None:
        if state["streaming"] and not watcher.cancelled():
            state["left"] = True
            task.cancel()

    watcher = asyncio.ensure_future(_until_disconnect(receive))
    watcher.add_done_callback(on_left)
    pieces: AsyncIterator[Any] = aiter(response.body_iterator)
    try:
        first = await anext(pieces, b"")
        await send(
            {
                "type": "http.response.start",
                "status": response.status_code,
                "headers": response.raw_headers,
            }
        )
        final = isinstance(first, FinalPiece)
        if first or final:  # an empty final piece still ends the response
            await send({"type": "http.response.body", "body": first, "more_body": not final})
        while not final:
            chunk = await anext(pieces, None)
            if chunk is None:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                break
            final = isinstance(chunk, FinalPiece)
            await send({"type": "http.response.body", "body": chunk, "more_body": not final})
    except asyncio.CancelledError:
        if not state["left"]:
            raise
        task.uncancel()
    finally:
        state["streaming"] = False
        watcher.cancel()
        aclose = getattr(pieces, "aclose", None)
        if aclose is not None:
            with contextlib.suppress(Exception):
                await aclose()


async def _until_disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
