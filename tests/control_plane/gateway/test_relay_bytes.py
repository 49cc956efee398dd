"""The streamed relay over real HTTP: plain chunks pass as the worker's bytes, counted; usage,
finish and error chunks are parsed; the token count ends exact."""

from __future__ import annotations

import asyncio
import itertools
from types import SimpleNamespace

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from control_plane.gateway.answer import Answers
from control_plane.gateway.proxy import (
    WorkerRejected,
    WorkerUnreachable,
    upstream_payload,
    upstream_session,
)
from control_plane.gateway.relay import FinalPiece, Relay, StreamBroken, StreamStats

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
    """Relay a worker that answers `body` at once; the client's SSE events."""
    pieces, stats, reported = await _relay_pieces([body], want_usage=want_usage)
    return _events(pieces), stats, sum(reported)


def _events(pieces: list[bytes]) -> list[bytes]:
    """The SSE events in the relayed pieces (a piece holds all one read brought)."""
    joined = b"".join(pieces)
    return [e + b"\n\n" for e in joined.split(b"\n\n") if e]


async def test_plain_chunks_pass_unchanged_and_usage_makes_the_count_exact() -> None:
    body = _sse(ROLE, TOKEN, TOKEN, FINISH, USAGE) + b"data: [DONE]\n\n"

    out, stats, reported = await _relay(body, want_usage=False)

    assert out[:3] == [b"data: " + c + b"\n\n" for c in (ROLE, TOKEN, TOKEN)]
    assert orjson.loads(out[3][6:]) == orjson.loads(FINISH)
    assert len(out) == 4  # the usage chunk is not the client's: it did not ask
    assert (stats.n_in, stats.n_out, stats.finish_reason) == (5, 3, "length")
    assert stats.first_token_at is not None and stats.finished_at is not None
    # all of it came in one read: the end is still stamped after the first token
    assert stats.finished_at >= stats.first_token_at
    assert reported == 3  # the role chunk is no token: progress charged exactly what usage says


async def test_a_client_that_asked_for_usage_gets_the_usage_chunk() -> None:
    out, stats, _ = await _relay(_sse(TOKEN, FINISH, USAGE) + b"data: [DONE]\n\n", want_usage=True)

    assert orjson.loads(out[-1][6:])["usage"]["completion_tokens"] == 3
    assert stats.n_out == 3


async def test_an_error_chunk_after_the_first_token_breaks_the_stream() -> None:
    with pytest.raises(StreamBroken, match="engine died"):
        await _relay(_sse(TOKEN, ERROR), want_usage=False)


@pytest.mark.parametrize(
    "bad",
    [
        b'{"usage": oops}',
        b'["usage"]',
        b'{"usage": 5}',
        b'{"usage": {"prompt_tokens": "x"}}',
        b'{"choices": 5, "usage": null}',
        b'{"choices": ["x"], "usage": null}',
    ],
)
async def test_a_chunk_that_is_not_a_json_object_breaks_the_stream(bad: bytes) -> None:
    """A worker's malformed chunk is the worker failing (an SSE error event, status `error`),
    not an exception that ends the stream as if the client had left."""
    with pytest.raises(StreamBroken, match=r"not a JSON object|not JSON|malformed chunk"):
        await _relay(_sse(TOKEN, bad), want_usage=False)


def test_continuous_usage_is_asked_of_the_worker_only_for_a_client_that_asked() -> None:
    plain = upstream_payload({"model": "m", "stream": True}, None)
    assert plain["stream_options"] == {"include_usage": True}
    continuous = upstream_payload({"model": "m"}, None, continuous=True)
    assert continuous["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}


async def _relay_pieces(
    writes: list[bytes],
    pieces: list[bytes] | None = None,
    *,
    want_usage: bool = True,
    gateway: _Gateway | None = None,
) -> tuple[list[bytes], StreamStats, list[int]]:
    """Relay a worker that sends `writes` one by one (each flushed, a pause between); the
    client's pieces are appended to `pieces` as they come. With `gateway`, the pieces are
    those of `Answers.stream` around the relay (which closes it and finishes the request)."""
    pieces = [] if pieces is None else pieces

    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await resp.prepare(request)
        for i, piece in enumerate(writes):
            if i:
                await asyncio.sleep(0.02)
            await resp.write(piece)
        await resp.write_eof()
        return resp

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
        if gateway is not None:
            answers = Answers(gateway.d, gateway.finish)  # type: ignore[arg-type]
            async for data in answers.stream(gateway.flight, relay):  # type: ignore[arg-type]
                gateway.log.append("final piece" if isinstance(data, FinalPiece) else "piece")
                pieces.append(data)
            return pieces, stats, reported
        try:
            async for data in relay.stream():
                pieces.append(data)
        finally:
            await relay.close()
    return pieces, stats, reported


class _Gateway:
    """What `Answers.stream` uses of its gateway: the reporter and the finisher (logged)."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.flight = SimpleNamespace(id="r1", grant=None)
        self.d = SimpleNamespace(reporter=SimpleNamespace(emit=lambda event: None))

    async def finish(self, flight: object, status: str, error: str | None) -> None:
        self.log.append(f"finished {status}")


async def test_the_answers_end_is_one_final_piece_sent_once_the_request_is_finished() -> None:
    gateway = _Gateway()
    first = _sse(ROLE, TOKEN)
    pieces, _, _ = await _relay_pieces(
        [first, _sse(FINISH, USAGE) + b"data: [DONE]\n\n"], gateway=gateway
    )

    assert gateway.log == ["piece", "finished ok", "final piece"]
    assert pieces[0] == first and not isinstance(pieces[0], FinalPiece)
    events = _events(pieces[1:])
    assert orjson.loads(events[-2][6:])["usage"]["completion_tokens"] == 3
    assert events[-1] == b"data: [DONE]\n\n"


async def test_tokens_read_with_an_error_and_done_still_reach_the_client() -> None:
    gateway = _Gateway()
    pieces, _, _ = await _relay_pieces(
        [_sse(TOKEN, TOKEN, ERROR) + b"data: [DONE]\n\n"], gateway=gateway
    )

    assert gateway.log == ["piece", "finished error"]  # the error event, then the finish
    events = _events(pieces)
    assert events[:2] == [_sse(TOKEN), _sse(TOKEN)]
    assert orjson.loads(events[2][6:])["error"]["code"] == "worker_failed"


async def test_what_one_read_brings_is_relayed_as_one_piece_and_reported_once() -> None:
    first = _sse(ROLE, TOKEN, TOKEN)
    pieces, stats, reported = await _relay_pieces(
        [first, _sse(FINISH, USAGE) + b"data: [DONE]\n\n"]
    )

    assert pieces[0] == first  # three events, one send to the client
    assert reported[0] == 2  # one progress report for the two tokens of that read
    assert sum(reported) == 3 and stats.n_out == 3


async def test_events_split_across_reads_are_put_back_together() -> None:
    body = _sse(ROLE, TOKEN, FINISH, USAGE) + b"data: [DONE]"  # no newline after the last line
    cuts = [0, 7, 60, 61, len(body) - 3, len(body)]
    writes = [body[a:b] for a, b in itertools.pairwise(cuts)]

    pieces, stats, reported = await _relay_pieces(writes)

    events = _events(pieces)
    assert events[:2] == [b"data: " + c + b"\n\n" for c in (ROLE, TOKEN)]
    assert orjson.loads(events[-1][6:])["usage"]["completion_tokens"] == 3
    assert (stats.n_out, sum(reported)) == (3, 3) and stats.finished_at is not None


async def test_tokens_read_together_with_an_error_reach_the_client_before_it_fails() -> None:
    pieces: list[bytes] = []

    with pytest.raises(StreamBroken, match="engine died"):
        await _relay_pieces([_sse(TOKEN, TOKEN, ERROR)], pieces)

    assert pieces == [_sse(TOKEN, TOKEN)]


async def _primed(
    writes: list[bytes], *, then_wait_s: float = 0.0, stream: bool = True
) -> tuple[Relay, StreamStats, list[bytes]]:
    """Prime a relay over a worker that sends `writes` (then waits `then_wait_s` before it
    ends the connection), within 3 s; then, when `stream`, stream the rest."""
    pieces: list[bytes] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await resp.prepare(request)
        for piece in writes:
            await resp.write(piece)
            await asyncio.sleep(0.02)
        await asyncio.sleep(then_wait_s)
        return resp  # no write_eof: the connection ends with the handler

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handler)
    async with TestServer(app) as server, upstream_session(5.0) as session:
        resp = await session.post(str(server.make_url("/v1/chat/completions")), data=b"{}")
        stats = StreamStats()
        relay = Relay(resp, stats, lambda n, _t: None, want_usage=False, want_continuous=False)
        try:
            await asyncio.wait_for(relay.prime(), 3.0)
            if stream:
                async for data in relay.stream():
                    pieces.append(data)
        finally:
            await relay.close()
    return relay, stats, pieces


async def test_a_worker_that_ends_before_its_first_token_fails_the_prime_as_unreachable() -> None:
    """The role chunk is no token: a worker that dies after it (in prefill, its 200 sent) has
    given the client nothing, so the request may be re-queued (WorkerUnreachable)."""
    with pytest.raises(WorkerUnreachable, match="without \\[DONE\\]"):
        await _primed([_sse(ROLE)])


async def test_an_error_chunk_before_the_first_token_fails_the_prime_as_unreachable() -> None:
    """vLLM answers an engine that died in prefill with an error chunk (and `[DONE]`): a
    failure before answering, retried elsewhere, where relaying it ended the request."""
    with pytest.raises(WorkerUnreachable, match="engine died"):
        await _primed([_sse(ROLE), _sse(ERROR) + b"data: [DONE]\n\n"])


async def test_an_error_chunk_that_is_the_request_s_fault_is_the_worker_s_refusal() -> None:
    """vLLM streams an error's HTTP status as `code`: a 4xx is the request's fault, not the
    worker's, so the client gets it as is (no retry on a second worker, no cooldown)."""
    bad = b'{"error":{"message":"bad logits","type":"BadRequestError","param":null,"code":400}}'
    with pytest.raises(WorkerRejected) as refused:
        await _primed([_sse(ROLE), _sse(bad) + b"data: [DONE]\n\n"])
    assert refused.value.status == 400
    assert refused.value.body["error"]["message"] == "bad logits"


@pytest.mark.parametrize(
    "first",
    [
        HEAD + b'"delta":{"reasoning_content":"Let me"},"finish_reason":null}]}',
        HEAD + b'"delta":{"reasoning":"Hmm"},"finish_reason":null}]}',
        HEAD + b'"delta":{"tool_calls":[{"index":0,"id":"t1","type":"function"}]}}]}',
    ],
)
async def test_prime_stops_at_the_first_output_of_any_kind(first: bytes) -> None:
    """A reasoning model's thinking or a tool call is output: the client hears it at once,
    not at the first text (which may come thousands of tokens later, or never)."""
    _, stats, _ = await _primed([_sse(ROLE, first)], then_wait_s=30, stream=False)
    assert stats.first_token_at is not None


async def test_an_answer_that_ends_with_no_token_and_no_finish_reason_fails_the_prime() -> None:
    """vLLM aborting a request in prefill (its engine shut down or paused) skips the empty
    output: the stream is the role chunk, the usage chunk and `[DONE]` — no answer at all,
    retried elsewhere, where it was an empty 200 recorded `ok`."""
    zero = USAGE.replace(b'"completion_tokens":3', b'"completion_tokens":0')
    with pytest.raises(WorkerUnreachable, match="before its first token"):
        await _primed([_sse(ROLE), _sse(zero) + b"data: [DONE]\n\n"])


async def test_an_empty_answer_with_a_finish_reason_is_an_answer() -> None:
    """An answer whose only token is the end of sequence has an empty text and a finish
    reason: served (nothing to retry)."""
    empty = HEAD + b'"delta":{"content":""},"logprobs":null,"finish_reason":"stop"}]}'
    _, stats, pieces = await _primed([_sse(ROLE), _sse(empty) + b"data: [DONE]\n\n"])
    assert stats.finish_reason == "stop" and stats.first_token_at is None
    assert orjson.loads(_events(pieces)[-1][6:])["choices"][0]["finish_reason"] == "stop"


async def test_prime_holds_the_answer_up_to_its_first_token_and_stream_relays_all_of_it() -> None:
    writes = [_sse(ROLE), _sse(TOKEN), _sse(FINISH, USAGE) + b"data: [DONE]\n\n"]

    _, stats, pieces = await _primed(writes)

    events = _events(pieces)
    assert events[:2] == [_sse(ROLE), _sse(TOKEN)]
    assert orjson.loads(events[2][6:])["choices"][0]["finish_reason"] == "length"
    assert (stats.n_out, stats.finish_reason) == (3, "length")
    assert stats.first_token_at is not None and stats.finished_at is not None


async def test_a_failure_after_the_first_token_is_a_broken_stream_not_a_retry() -> None:
    with pytest.raises(StreamBroken):
        await _primed([_sse(ROLE), _sse(TOKEN)])
