"""The completion routes' fast path answers every request exactly as FastAPI's routes do.

Each request below is sent twice to the same live app: once through the app as served (the
fast path first) and once through FastAPI alone (`GatewayApp.fallback`); status, body and the
headers a client acts on must be identical. The fast path itself is shown to serve a valid
request without FastAPI (its fallback replaced by one that fails)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.types import Receive, Scope, Send

from control_plane.api.hot_path import GatewayApp
from control_plane.gateway.relay import FinalPiece
from tests.control_plane.api.gateway_app import Gateway, gateway

CHAT = "/v1/chat/completions"
TEXT = "/v1/completions"
MSG = '"messages":[{"role":"user","content":"hi"}]'
JSON = "application/json"
LIMIT = 4096

NOPE = b'{"model":"nope",' + MSG.encode() + b"}"
CASES: list[tuple[str, str, str | None, bytes]] = [
    # (path, what, content type, body)
    (CHAT, "unknown model", JSON, NOPE),
    (
        CHAT,
        "json with charset",
        JSON + "; charset=utf-8",
        b'{"model":"nope",' + MSG.encode() + b"}",
    ),
    (CHAT, "no content type", None, NOPE),
    (CHAT, "text/plain", "text/plain", NOPE),
    (CHAT, "form", "application/x-www-form-urlencoded", b"model=nope"),
    (CHAT, "malformed json", JSON, b'{"model": "nope",'),
    (CHAT, "empty body", JSON, b""),
    (CHAT, "a list", JSON, b"[]"),
    (CHAT, "a string", JSON, b'"hello"'),
    (CHAT, "null", JSON, b"null"),
    (CHAT, "no messages", JSON, b'{"model":"nope","messages":[]}'),
    (CHAT, "model a number", JSON, b'{"model":5,' + MSG.encode() + b"}"),
    (CHAT, "stream a string", JSON, b'{"model":"m","stream":"yes",' + MSG.encode() + b"}"),
    (CHAT, "max_tokens a string", JSON, b'{"model":"m","max_tokens":"5",' + MSG.encode() + b"}"),
    (CHAT, "NaN", JSON, b'{"model":"m","temperature":NaN,' + MSG.encode() + b"}"),
    (
        CHAT,
        "huge integer",
        JSON,
        b'{"model":"m","max_tokens":1' + b"0" * 30 + b"," + MSG.encode() + b"}",
    ),
    (CHAT, "lone surrogate", JSON, b'{"model":"\\ud800",' + MSG.encode() + b"}"),
    (CHAT, "bad role", JSON, b'{"model":"m","messages":[{"role":"x","content":"hi"}]}'),
    (TEXT, "two prompts", JSON, b'{"model":"m","prompt":["a","b"]}'),
    (TEXT, "unknown model", JSON, b'{"model":"nope","prompt":"a"}'),
    (TEXT, "no prompt", JSON, b'{"model":"nope"}'),
]
AUTH_CASES = [("no key", None), ("not bearer", "Basic abc"), ("unknown key", "Bearer " + "x" * 40)]


class FastApiOnly:
    """The same app, every request answered by FastAPI's routes."""

    def __init__(self, app: GatewayApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app.fallback(scope, receive, send)


def _client(app: Any) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 40000))
    return httpx.AsyncClient(transport=transport, base_url="http://arbiter.test")


def _seen(resp: httpx.Response) -> tuple[Any, ...]:
    headers = {k: resp.headers.get(k) for k in ("content-type", "retry-after", "www-authenticate")}
    return resp.status_code, resp.json(), headers


@pytest.fixture
async def gw(redis_url: str, tmp_path: Path) -> AsyncIterator[Gateway]:
    async with gateway(redis_url, tmp_path, max_body_bytes=LIMIT) as served:
        yield served


async def _both(gw: Gateway, path: str, **kwargs: Any) -> tuple[httpx.Response, httpx.Response]:
    assert isinstance(gw.app, GatewayApp)
    async with _client(gw.app) as fast, _client(FastApiOnly(gw.app)) as slow:
        return await fast.post(path, **kwargs), await slow.post(path, **kwargs)


@pytest.mark.parametrize(("path", "what", "ctype", "body"), CASES, ids=[c[1] for c in CASES])
async def test_every_answer_is_fastapis(
    gw: Gateway, path: str, what: str, ctype: str | None, body: bytes
) -> None:
    headers = {"Authorization": f"Bearer {gw.key}"}
    if ctype is not None:
        headers["Content-Type"] = ctype
    fast, slow = await _both(gw, path, content=body, headers=headers)

    assert _seen(fast) == _seen(slow), what
    assert fast.status_code >= 400 and set(fast.json()) == {"error"}


@pytest.mark.parametrize(("what", "auth"), AUTH_CASES, ids=[a[0] for a in AUTH_CASES])
async def test_authentication_refusals_are_fastapis(
    gw: Gateway, what: str, auth: str | None
) -> None:
    headers = {"Content-Type": JSON} | ({"Authorization": auth} if auth else {})
    fast, slow = await _both(gw, CHAT, content=NOPE, headers=headers)

    assert _seen(fast) == _seen(slow), what
    assert fast.status_code == 401


async def test_bodies_over_the_limit_are_refused_announced_or_streamed(gw: Gateway) -> None:
    headers = {"Authorization": f"Bearer {gw.key}", "Content-Type": JSON}
    big = b'{"model":"nope","prompt":"' + b"a" * LIMIT + b'"}'

    async def chunked() -> AsyncIterator[bytes]:  # no content-length: counted as it comes
        for i in range(0, len(big), 1000):
            yield big[i : i + 1000]

    announced = await _both(gw, TEXT, content=big, headers=headers)
    async with _client(gw.app) as fast:
        streamed = await fast.post(TEXT, content=chunked(), headers=headers)

    assert _seen(announced[0]) == _seen(announced[1])
    assert announced[0].status_code == 413 == streamed.status_code
    assert streamed.json()["error"]["code"] == "request_too_large"


async def test_a_valid_request_never_reaches_fastapi(gw: Gateway) -> None:
    async def refuse(scope: Scope, receive: Receive, send: Send) -> None:
        raise AssertionError(f"{scope['path']} fell back to FastAPI")

    assert isinstance(gw.app, GatewayApp)
    gw.app.fallback = refuse  # type: ignore[method-assign]
    headers = {"Authorization": f"Bearer {gw.key}"}
    async with _client(gw.app) as client:
        chat = await client.post(
            CHAT, json={"model": "nope", "messages": [{"role": "user"}]}, headers=headers
        )
        text = await client.post(TEXT, json={"model": "nope", "prompt": "a"}, headers=headers)

    for resp in (chat, text):  # served as far as the door: the model is unknown
        assert resp.status_code == 404, resp.text
        assert resp.json()["error"]["code"] == "model_not_found"


async def _sent_by_stream(pieces: list[bytes]) -> list[dict[str, Any]]:
    """The ASGI messages `_stream` sends for a streamed answer of `pieces`."""
    from starlette.responses import StreamingResponse

    from control_plane.api.hot_path import _stream

    closed: list[bool] = []

    async def body() -> AsyncIterator[bytes]:
        try:
            for piece in pieces:
                yield piece
        finally:
            closed.append(True)

    sent: list[dict[str, Any]] = []

    async def send(message: Any) -> None:
        sent.append(message)

    async def receive() -> Any:
        await asyncio.sleep(3600)

    await _stream(StreamingResponse(body()), receive, send)
    assert closed == [True]
    return sent


async def test_a_final_piece_ends_the_response_in_the_same_message() -> None:
    sent = await _sent_by_stream([b"data: a\n\n", FinalPiece(b"data: b\n\ndata: [DONE]\n\n")])
    assert [(m["type"], m.get("body"), m.get("more_body")) for m in sent] == [
        ("http.response.start", None, None),
        ("http.response.body", b"data: a\n\n", True),
        ("http.response.body", b"data: b\n\ndata: [DONE]\n\n", False),
    ]


async def test_without_a_final_piece_an_empty_message_ends_the_response() -> None:
    sent = await _sent_by_stream([b"data: a\n\n"])
    assert [(m.get("body"), m.get("more_body")) for m in sent[1:]] == [
        (b"data: a\n\n", True),
        (b"", False),
    ]


async def test_the_headers_wait_for_the_first_piece_and_go_in_the_same_turn() -> None:
    """Nothing is sent before the first piece exists; then the start and that piece are sent
    in the same loop turn (one write through the connection's `HeadersWithBody`)."""
    from starlette.responses import StreamingResponse

    from control_plane.api.hot_path import _stream

    ready = asyncio.Event()
    turn = 0
    log: list[tuple[str, int]] = []

    async def ticker() -> None:
        nonlocal turn
        while True:
            turn += 1
            await asyncio.sleep(0)

    async def body() -> AsyncIterator[bytes]:
        await ready.wait()
        yield b"data: a\n\n"
        yield FinalPiece(b"data: [DONE]\n\n")

    async def send(message: Any) -> None:
        log.append((message["type"], turn))

    async def receive() -> Any:
        await asyncio.sleep(3600)

    ticking = asyncio.create_task(ticker())
    streaming = asyncio.create_task(_stream(StreamingResponse(body()), receive, send))
    for _ in range(3):
        await asyncio.sleep(0)
    assert log == []
    ready.set()
    await streaming
    ticking.cancel()
    (start, at), (first, then) = log[:2]
    assert (start, first) == ("http.response.start", "http.response.body") and at == then


async def test_an_answer_in_one_final_piece_or_in_none() -> None:
    sent = await _sent_by_stream([FinalPiece(b"data: [DONE]\n\n")])
    assert [(m["type"], m.get("body"), m.get("more_body")) for m in sent] == [
        ("http.response.start", None, None),
        ("http.response.body", b"data: [DONE]\n\n", False),
    ]
    sent = await _sent_by_stream([])
    assert [(m["type"], m.get("body"), m.get("more_body")) for m in sent] == [
        ("http.response.start", None, None),
        ("http.response.body", b"", False),
    ]
    sent = await _sent_by_stream([FinalPiece(b"")])  # empty, and still the end
    assert [(m["type"], m.get("body"), m.get("more_body")) for m in sent] == [
        ("http.response.start", None, None),
        ("http.response.body", b"", False),
    ]
