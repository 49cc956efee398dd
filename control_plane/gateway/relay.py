"""Relaying a worker's answer to the client and counting its tokens as they pass.

The worker is always asked to stream with `include_usage`, so the gateway learns the exact
token counts from the last chunk, whatever the client asked for; `continuous_usage_stats` only
when the client asked for it. The client then gets exactly the shape it asked for: a stream
(with usage chunks only if it asked), or one aggregated JSON body. Streamed chunks are relayed
as the worker's bytes, unparsed, unless they carry usage, a finish reason or an error, and as
one piece per read of the worker's connection (one send to the client, one progress report);
the tokens relayed are counted (one per content chunk, then exactly from the usage chunk) in
`StreamStats` and reported as progress.

Before anything is sent, `prime` reads the answer up to its first output (a token of text,
thinking or a tool call) and holds it: vLLM sends its `200` before prefill, so a worker that
dies in prefill fails a request whose client has received nothing yet, and the gateway
re-queues it (architecture.md §2, invariant 5).
"""

from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson

from control_plane.gateway.collected import Collected
from control_plane.gateway.collected import aggregate as collected_body
from control_plane.gateway.errors import error_body
from control_plane.gateway.proxy import WorkerRejected, WorkerUnreachable, worker_error_body

DONE = b"data: [DONE]\n\n"
_FINISHED = re.compile(rb'"finish_reason":\s*"')
_CONTENT = re.compile(rb'"(?:text|content)":\s*"[^"]')
"""A chunk that carries generated text: a chat's role chunk (`"content":""`) or an empty
finish chunk is no token, and progress once charged is never refunded."""
_GENERATED = re.compile(
    rb'"(?:text|content|reasoning_content|reasoning)":\s*"[^"]|"tool_calls":\s*\[\s*\{'
)
"""A chunk that carries generated output of any kind — text, a reasoning model's thinking, a
tool call: where `prime` stops holding the answer."""


class FinalPiece(bytes):
    """The last bytes of a streamed answer, sent once the request is finished: whoever writes
    them to the client may end the response with them (one write instead of three)."""


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
    collected: Collected = field(default_factory=Collected)
    last_chunk: dict[str, Any] | None = None


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
        self._unreported = 0
        """Tokens counted from plain chunks and not yet reported to `on_tokens`."""
        self._source = self._blocks()
        self._held: deque[list[bytes]] = deque()
        """What `prime` read, handed out before the rest of `_source`."""

    @property
    def ended(self) -> bool:
        """The worker's `[DONE]` has been read: what `stream` yields now ends the answer."""
        return self._done

    async def prime(self) -> None:
        """Read the answer up to its first generated token (text, thinking or a tool call:
        `_GENERATED`) or its end, and hold it for `stream`/`collect` (nothing is counted yet;
        the first token is stamped as read). Raises WorkerUnreachable when the worker fails
        first: nothing has reached the client, so the request may go to another worker — its
        connection lost; an error chunk without a 4xx `code` (vLLM streams the error's HTTP
        status there, 500 when its engine died); or an answer that ends with neither a token
        nor a finish reason (vLLM aborting a request still in prefill: its engine shut down or
        paused). WorkerRejected for an error chunk with a 4xx `code` (vLLM's status for the
        request's fault: the client gets it as is)."""
        finished = False
        while not self._done:
            try:
                payloads = await anext(self._source)
            except StopAsyncIteration:
                break
            self._held.append(payloads)
            for data in payloads:
                if b'"error"' in data:
                    self._raise_if_error(data)
            if any(_GENERATED.search(data) for data in payloads):
                self._stats.first_token_at = time.time()
                return
            finished = finished or any(_FINISHED.search(data) for data in payloads)
        if not finished:
            raise self._failure("the worker ended the answer before its first token")

    def _raise_if_error(self, data: bytes) -> None:
        """Raise for an error chunk read before the first token (see `prime`)."""
        try:
            chunk = orjson.loads(data)
        except orjson.JSONDecodeError:
            return  # reported when the chunk is relayed
        if not isinstance(chunk, dict) or "error" not in chunk or "choices" in chunk:
            return
        err = chunk["error"]
        status = err.get("code") if isinstance(err, dict) else None
        if type(status) is int and 400 <= status < 500:
            raise WorkerRejected(status, worker_error_body(data, status))
        raise self._failure(str(err))

    def _rest(self) -> AsyncIterator[list[bytes]]:
        """The payload lists still to handle: those `prime` held, then the connection's."""
        return self._held_then_source() if self._held else self._source

    async def _held_then_source(self) -> AsyncIterator[list[bytes]]:
        while self._held:
            yield self._held.popleft()
        async for payloads in self._source:
            yield payloads

    async def _blocks(self) -> AsyncGenerator[list[bytes], None]:
        """The worker's SSE `data:` payloads before `[DONE]`, as many as one read of the
        connection brought (one list per read, never empty); after `[DONE]` the body is read
        to its end (so the connection is reused). Raises WorkerUnreachable/StreamBroken."""
        pending = b""
        try:
            async for block in self._resp.content.iter_any():
                lines = (pending + block).split(b"\n") if pending else block.split(b"\n")
                pending = lines.pop()
                payloads = self._data_of(lines)
                if payloads:
                    yield payloads
                self._stamp_finish()
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            if self._done:
                return
            raise self._failure(f"{type(exc).__name__}: {exc}") from exc
        last = self._data_of([pending]) if pending else []
        if last:
            yield last
        self._stamp_finish()
        if not self._done:
            raise self._failure("worker closed the stream without [DONE]")

    def _data_of(self, lines: list[bytes]) -> list[bytes]:
        payloads: list[bytes] = []
        for line in lines:
            if not line.startswith(b"data: "):
                continue
            data = line[6:].rstrip()
            if data == b"[DONE]":
                self._done = True
            elif not self._done:
                payloads.append(data)
        return payloads

    def _stamp_finish(self) -> None:
        """The end is stamped once the payloads read with `[DONE]` have been handled (their
        first token stamped), so a request never finishes before its first token."""
        if self._done and self._stats.finished_at is None:
            self._stats.finished_at = time.time()

    async def chunks(self) -> AsyncIterator[dict[str, Any]]:
        """Yield parsed chunks (dict) in order; raises WorkerUnreachable/StreamBroken on failure."""
        async for payloads in self._rest():
            for data in payloads:
                yield self._parsed(data)

    async def collect(self, chat: bool) -> None:
        """Read the whole answer, its text into the stats (a non-streamed answer)."""
        async for chunk in self.chunks():
            try:
                collect_piece(chunk, self._stats, chat)
            except (TypeError, AttributeError, ValueError) as exc:
                raise self._failure(f"the worker sent a malformed chunk: {exc!r}") from None

    async def stream(self) -> AsyncIterator[bytes]:
        """The client's SSE bytes, one piece per read of the worker's connection. A plain
        content chunk (no usage, finish reason or error in it) is forwarded unchanged and
        counted as one token when it carries text; the others are parsed and re-encoded as
        `encode` says (the usage chunk makes the count exact). With continuous usage every
        chunk is parsed (usage must be read from each). Raises as `chunks`, after yielding what
        came before the failure."""
        async for payloads in self._rest():
            out: list[bytes] = []
            try:
                for data in payloads:
                    piece = self._piece(data)
                    if piece is not None:
                        out.append(piece)
            except (WorkerUnreachable, StreamBroken):
                if out:
                    yield b"".join(out)
                raise
            finally:
                self._report()
            if out:
                yield out[0] if len(out) == 1 else b"".join(out)

    def _piece(self, data: bytes) -> bytes | None:
        """The client's bytes for one payload (None: nothing for it), counted."""
        if self._want_continuous or (
            b'"usage"' in data or b'"error"' in data or _FINISHED.search(data)
        ):
            return self.encode(self._parsed(data))
        if _CONTENT.search(data):
            stats = self._stats
            if stats.first_token_at is None:
                stats.first_token_at = time.time()
            stats.n_out += 1
            self._unreported += 1
        return b"data: " + data + b"\n\n"

    def _report(self) -> None:
        """Progress of the tokens counted since the last report (one call per read)."""
        if self._unreported:
            counted, self._unreported = self._unreported, 0
            self._on_tokens(counted, time.time())

    def _parsed(self, data: bytes) -> dict[str, Any]:
        try:
            chunk = orjson.loads(data)
        except orjson.JSONDecodeError as exc:  # a worker's fault, not the client's leaving
            raise self._failure(f"the worker sent a chunk that is not JSON: {exc}") from None
        if not isinstance(chunk, dict):
            raise self._failure("the worker sent a chunk that is not a JSON object")
        if "error" in chunk and "choices" not in chunk:
            raise self._failure(str(chunk["error"]))
        try:
            self._account(chunk)
        except (TypeError, AttributeError, ValueError) as exc:  # fields of the wrong type
            raise self._failure(f"the worker sent a malformed chunk: {exc!r}") from None
        return chunk

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
    """Accumulate a non-streamed answer (`collected.py`)."""
    stats.collected.add(chunk, chat)


def aggregate(stats: StreamStats, *, chat: bool, request_id: str, model: str) -> dict[str, Any]:
    """One OpenAI-shaped (chat.)completion body from the relayed stream."""
    return collected_body(
        stats.collected,
        chat=chat,
        request_id=request_id,
        model=model,
        n_in=stats.n_in or 0,
        n_out=stats.n_out,
        finish_reason=stats.finish_reason,
        last_chunk=stats.last_chunk,
    )


def _has_text(choice: Any) -> bool:
    """Whether a streamed choice carries generated text (completions' `text`, chat's
    `delta.content`)."""
    if not isinstance(choice, dict):
        return False
    delta = choice.get("delta")
    return bool(choice.get("text") or (isinstance(delta, dict) and delta.get("content")))
