"""The streamed relay over real HTTP: plain chunks pass as the worker's bytes, counted; usage,
finish and error chunks are parsed; the token count ends exact."""

from __future__ import annotations

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from control_plane.gateway.proxy import (
    Relay,
    StreamBroken,
    StreamStats,
    upstream_payload,
    upstream_session,
)

HEAD = b'{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,'
ROLE = HEAD + b'"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}'
TOKEN = HEAD + b'"delta":{"content":"say \\"usage\\""},"logprobs":null,"finish_reason":null}]}'
FINISH = HEAD + b'"delta":{"content":"!"},"logprobs":null,"finish_reason":"length"}]}'
USAGE = (
    b'{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],'
    b'"usage":{"prompt_tokens":5,"total_tokens":8,"completion_tokens":3}}'
)
ERROR = b'{"error":{"message":"engine died","type":"server_error"}}'


def _sse(*chunks: bytes) -> bytes:
    return b"".join(b"data: " + c + b"\n\n" for c in chunks)


async def _relay(body: bytes, *, want_usage: bool) -> tuple[list[bytes], StreamStats, int]:
    async def handler(_: web.Request) -> web.Response:
        return web.Response(body=body, content_type="text/event-stream")

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handler)
    reported: list[int] = []
    async with TestServer(app) as server, upstream_session(5.0) as session:
        resp = await session.post(str(server.make_url("/v1/chat/completions")), data=b"{}")
        stats = StreamStats()
        relay = Relay(
            resp,
            stats,
            lambda n, _t: reported.append(n),
            want_usage=want_usage,
            want_continuous=False,
        )
        try:
            out = [data async for data in relay.stream()]
        finally:
            await relay.close()
    return out, stats, sum(reported)


async def test_plain_chunks_pass_unchanged_and_usage_makes_the_count_exact() -> None:
    body = _sse(ROLE, TOKEN, TOKEN, FINISH, USAGE) + b"data: [DONE]\n\n"

    out, stats, reported = await _relay(body, want_usage=False)

    assert out[:3] == [b"data: " + c + b"\n\n" for c in (ROLE, TOKEN, TOKEN)]
    assert orjson.loads(out[3][6:]) == orjson.loads(FINISH)
    assert len(out) == 4  # the usage chunk is not the client's: it did not ask
    assert (stats.n_in, stats.n_out, stats.finish_reason) == (5, 3, "length")
    assert stats.first_token_at is not None and stats.finished_at is not None
    assert reported == 3  # the role chunk is no token: progress charged exactly what usage says


async def test_a_client_that_asked_for_usage_gets_the_usage_chunk() -> None:
    out, stats, _ = await _relay(_sse(TOKEN, FINISH, USAGE) + b"data: [DONE]\n\n", want_usage=True)

    assert orjson.loads(out[-1][6:])["usage"]["completion_tokens"] == 3
    assert stats.n_out == 3


async def test_an_error_chunk_after_the_first_token_breaks_the_stream() -> None:
    with pytest.raises(StreamBroken, match="engine died"):
        await _relay(_sse(TOKEN, ERROR), want_usage=False)


def test_continuous_usage_is_asked_of_the_worker_only_for_a_client_that_asked() -> None:
    plain = upstream_payload({"model": "m", "stream": True}, None)
    assert plain["stream_options"] == {"include_usage": True}
    continuous = upstream_payload({"model": "m"}, None, continuous=True)
    assert continuous["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
