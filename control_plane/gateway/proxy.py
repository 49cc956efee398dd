"""The streaming proxy: forward one granted request to its worker and relay the answer.

The worker is always asked to stream with `include_usage`, so the gateway learns the exact
token counts from the last chunk, whatever the client asked for; `continuous_usage_stats` only
when the client asked for it. The client then gets exactly the shape it asked for: a stream
(with usage chunks only if it asked), or one aggregated JSON body. A streamed chunk is relayed
as the worker's bytes, unparsed, unless it carries usage, a finish reason or an error; the
tokens relayed are counted (one per content chunk, then exactly from the usage chunk) in
`StreamStats` and reported as progress.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson

from control_plane.gateway.errors import error_body

DONE = b"data: [DONE]\n\n"
_FINISHED = re.compile(rb'"finish_reason":\s*"')
_CONTENT = re.compile(rb'"(?:text|content)":\s*"[^"]')
"""A chunk that carries generated text: a chat's role chunk (`"content":""`) or an empty
finish chunk is no token, and progress once charged is never refunded."""


class WorkerUnreachable(Exception):
    """The worker failed before sending a first token (connect error, 5xx, broken stream)."""


class WorkerRejected(Exception):
    """The worker refused the request (4xx): the client gets the worker's error as is."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(f"worker answered {status}")
        self.status = status
        self.body = body


class StreamBroken(Exception):
    """The worker failed after the first token; the client gets an error event."""


@dataclass(slots=True)
class StreamStats:
    """What the relay observed: token counts (exact, from usage) and timestamps (epoch s)."""

    n_in: int | None = None
    n_out: int = 0
    first_token_at: float | None = None
    finished_at: float | None = None
    finish_reason: str | None = None
    role: str = "assistant"
    pieces: list[str] = field(default_factory=list)
    last_chunk: dict[str, Any] | None = None


def upstream_payload(
    body: dict[str, Any], priority: int | None, *, continuous: bool = False
) -> dict[str, Any]:
    """The client's body as the worker must see it: always streamed, with usage at the end
    (and on every chunk when `continuous`: the client asked for it)."""
    payload = dict(body)
    payload.pop("metadata", None)
    payload["stream"] = True
    payload["stream_options"] = {"include_usage": True}
    if continuous:
        payload["stream_options"]["continuous_usage_stats"] = True
    payload.pop("priority", None)
    if priority is not None:
        payload["priority"] = priority
    return payload


def upstream_session(
    connect_timeout_s: float, idle_timeout_s: float | None = None
) -> aiohttp.ClientSession:
    """The pooled client for workers (aiohttp: several times cheaper per streamed line than
    httpx on the relay's hot path). Create it inside the running event loop. A worker silent
    for `idle_timeout_s` (any one read) fails the request instead of holding it forever."""
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=60),
        timeout=aiohttp.ClientTimeout(
            total=None, sock_connect=connect_timeout_s, sock_read=idle_timeout_s
        ),
        json_serialize=lambda obj: orjson.dumps(obj).decode(),
    )


async def open_upstream(
    session: aiohttp.ClientSession,
    url: str,
    payload: dict[str, Any],
    read_timeout_s: float | None = None,
) -> aiohttp.ClientResponse:
    """Send the request and wait for the worker's status line; classify failures.
    `read_timeout_s` replaces the session's idle bound for this request."""
    timeout = None
    if read_timeout_s is not None:
        base = session.timeout
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=base.sock_connect, sock_read=read_timeout_s
        )
    try:
        resp = await session.post(
            url, data=orjson.dumps(payload), headers=_JSON, timeout=timeout or session.timeout
        )
    except (aiohttp.ClientError, OSError) as exc:
        raise WorkerUnreachable(f"{type(exc).__name__}: {exc}") from exc
    if resp.status == 200:
        return resp
    raw = await _read_safely(resp)
    if 400 <= resp.status < 500:
        raise WorkerRejected(resp.status, _as_error(raw, resp.status))
    raise WorkerUnreachable(f"worker answered {resp.status}")


_JSON = {"content-type": "application/json"}


class ClientLeft(Exception):
    """The client disconnected while its worker was working."""


async def open_unless_left(
    session: aiohttp.ClientSession,
    url: str,
    payload: dict[str, Any],
    read_timeout_s: float,
    left: asyncio.Future[None],
) -> aiohttp.ClientResponse:
    """`open_upstream` for an answer that sends nothing until it is done (an image
    generation), raced against `left` (the client's disconnect): `ClientLeft` when the client
    goes first, after closing the connection, so the worker aborts the work."""
    task = asyncio.ensure_future(open_upstream(session, url, payload, read_timeout_s))
    waited: set[asyncio.Future[Any]] = {task, left}
    await asyncio.wait(waited, return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        return task.result()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, WorkerUnreachable, WorkerRejected):
        await task
    raise ClientLeft


async def _read_safely(resp: aiohttp.ClientResponse) -> bytes:
    try:
        return await resp.read()
    except (aiohttp.ClientError, OSError):
        return b""
    finally:
        resp.release()


def _as_error(raw: bytes, status: int) -> dict[str, Any]:
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("error"), dict):
        err = data["error"]
        return error_body(
            str(err.get("message", "")),
            str(err.get("type") or "invalid_request_error"),
            err.get("param"),
            _code(err.get("code"), status),
        )
    if isinstance(data, dict) and "message" in data:  # vLLM's older flat ErrorResponse
        return error_body(
            str(data["message"]),
            str(data.get("type") or "invalid_request_error"),
            data.get("param"),
            _code(data.get("code"), status),
        )
    return error_body(
        raw.decode(errors="replace")[:500] or f"worker answered {status}",
        "invalid_request_error",
        None,
        None,
    )


def _code(code: Any, status: int) -> str | None:
    if code is None or isinstance(code, str):
        return code
    return None if code == status else str(code)


class Relay:
    """Turns the worker's SSE stream into the client's bytes, counting tokens as they pass."""

    def __init__(
        self,
        resp: aiohttp.ClientResponse,
        stats: StreamStats,
        on_tokens: Callable[[int, float], None],
        *,
        want_usage: bool,
        want_continuous: bool,
    ) -> None:
        self._resp = resp
        self._stats = stats
        self._on_tokens = on_tokens
        self._want_usage = want_usage
        self._want_continuous = want_continuous
        self._done = False

    async def _payloads(self) -> AsyncIterator[bytes]:
        """The worker's SSE `data:` payloads before `[DONE]`; after it, the body is read to
        its end (so the connection is reused). Raises WorkerUnreachable/StreamBroken."""
        try:
            async for line in self._resp.content:
                if not line.startswith(b"data: "):
                    continue
                data = line[6:].rstrip()
                if data == b"[DONE]":
                    self._stats.finished_at = time.time()
                    self._done = True
                elif not self._done:
                    yield data
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            if self._done:
                return
            raise self._failure(f"{type(exc).__name__}: {exc}") from exc
        if not self._done:
            raise self._failure("worker closed the stream without [DONE]")

    async def chunks(self) -> AsyncIterator[dict[str, Any]]:
        """Yield parsed chunks (dict) in order; raises WorkerUnreachable/StreamBroken on failure."""
        async for data in self._payloads():
            yield self._parsed(data)

    async def stream(self) -> AsyncIterator[bytes]:
        """The client's SSE bytes. A plain content chunk (no usage, finish reason or error in
        it) is forwarded unchanged and counted as one token when it carries text; the others
        are parsed and re-encoded as `encode` says (the usage chunk makes the count exact).
        With continuous usage every chunk is parsed (usage must be read from each). Raises as
        `chunks`."""
        if self._want_continuous:
            async for chunk in self.chunks():
                out = self.encode(chunk)
                if out is not None:
                    yield out
            return
        async for data in self._payloads():
            if b'"usage"' in data or b'"error"' in data or _FINISHED.search(data):
                out = self.encode(self._parsed(data))
                if out is not None:
                    yield out
            else:
                if _CONTENT.search(data):
                    self._count_one()
                yield b"data: " + data + b"\n\n"

    def _parsed(self, data: bytes) -> dict[str, Any]:
        chunk: dict[str, Any] = orjson.loads(data)
        if "error" in chunk and "choices" not in chunk:
            raise self._failure(str(chunk["error"]))
        self._account(chunk)
        return chunk

    def _count_one(self) -> None:
        now = time.time()
        stats = self._stats
        if stats.first_token_at is None:
            stats.first_token_at = now
        stats.n_out += 1
        self._on_tokens(1, now)

    async def close(self) -> None:
        """Return a finished connection to the pool; close an unfinished one, which makes the
        worker abort the request (its client is gone)."""
        if self._done:
            self._resp.release()
        else:
            self._resp.close()

    def _failure(self, why: str) -> Exception:
        if self._stats.first_token_at is None:
            return WorkerUnreachable(why)
        return StreamBroken(why)

    def _account(self, chunk: dict[str, Any]) -> None:
        usage = chunk.get("usage")
        now = time.time()
        if usage:
            self._stats.n_in = int(usage.get("prompt_tokens") or 0)
            total = int(usage.get("completion_tokens") or 0)
            # exact, where counting chunks was not (a chat's role chunk, several tokens a chunk)
            self._stats.n_out = min(self._stats.n_out, total)
        else:
            total = self._stats.n_out + (
                1 if any(map(_has_text, chunk.get("choices") or ())) else 0
            )
        delta = total - self._stats.n_out
        if delta > 0:
            if self._stats.first_token_at is None:
                self._stats.first_token_at = now
            self._stats.n_out = total
            self._on_tokens(delta, now)
        for choice in chunk.get("choices") or ():
            if choice.get("finish_reason"):
                self._stats.finish_reason = choice["finish_reason"]
        self._stats.last_chunk = chunk

    def encode(self, chunk: dict[str, Any]) -> bytes | None:
        """The SSE bytes the client should see for `chunk`, or None to drop it."""
        if not chunk.get("choices"):
            return _sse(chunk) if self._want_usage and chunk.get("usage") else None
        if self._want_continuous:
            return _sse(chunk)
        if "usage" in chunk:
            chunk = {k: v for k, v in chunk.items() if k != "usage"}
        return _sse(chunk)


def _sse(chunk: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(chunk) + b"\n\n"


def error_event(message: str, code: str = "worker_failed") -> bytes:
    return b"data: " + orjson.dumps(error_body(message, "server_error", None, code)) + b"\n\n"


def collect_piece(chunk: dict[str, Any], stats: StreamStats, chat: bool) -> None:
    """Accumulate text for a non-streamed answer."""
    for choice in chunk.get("choices") or ():
        if chat:
            delta = choice.get("delta") or {}
            if delta.get("role"):
                stats.role = delta["role"]
            if delta.get("content"):
                stats.pieces.append(delta["content"])
        elif choice.get("text"):
            stats.pieces.append(choice["text"])


def aggregate(stats: StreamStats, *, chat: bool, request_id: str, model: str) -> dict[str, Any]:
    """One OpenAI-shaped (chat.)completion body from the relayed stream."""
    base = stats.last_chunk or {}
    n_in = stats.n_in or 0
    usage = {
        "prompt_tokens": n_in,
        "completion_tokens": stats.n_out,
        "total_tokens": n_in + stats.n_out,
    }
    text = "".join(stats.pieces)
    if chat:
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": stats.role, "content": text},
            "logprobs": None,
            "finish_reason": stats.finish_reason,
        }
        obj = "chat.completion"
    else:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": stats.finish_reason}
        obj = "text_completion"
    return {
        "id": base.get("id", request_id),
        "object": obj,
        "created": base.get("created", int(time.time())),
        "model": base.get("model", model),
        "choices": [choice],
        "usage": usage,
    }


def _has_text(choice: Any) -> bool:
    """Whether a streamed choice carries generated text (completions' `text`, chat's
    `delta.content`)."""
    if not isinstance(choice, dict):
        return False
    delta = choice.get("delta")
    return bool(choice.get("text") or (isinstance(delta, dict) and delta.get("content")))
