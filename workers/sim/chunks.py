"""Response bodies byte-for-byte in vLLM 0.32's shapes (SSE chunks and whole JSON answers).

Streaming follows ``chat_completion_stream_generator`` / ``completion_stream_generator``:

- chat: a first chunk carrying ``delta: {"role": "assistant", "content": ""}`` is sent together
  with the first token (vLLM emits it on the first engine output), then one chunk per engine
  step with ``delta: {"content": ...}``; the step that finishes carries ``finish_reason`` and
  ``stop_reason``; completions send only the token chunks, with ``text``.
- ``stream_options.include_usage``: a last chunk with ``choices: []`` and the totals.
- ``continuous_usage_stats`` (only with ``include_usage``): every chunk carries ``usage`` with
  the tokens so far.
- ``system_fingerprint`` rides on the finishing chunk when there is no usage chunk, else on the
  usage chunk; the stream ends with ``data: [DONE]``.

The hot path is :meth:`ChunkEncoder.token_chunk`: a few byte concatenations around the JSON
encoding of the token text.
"""

from __future__ import annotations

import time
from typing import Any, Final

import orjson

from workers.sim.requests import Kind

DONE: Final = b"data: [DONE]\n\n"


class ChunkEncoder:
    """Encodes one request's SSE chunks; every fixed part is pre-encoded once per request."""

    __slots__ = (
        "_fingerprint",
        "_head",
        "_usage_tail",
        "continuous",
        "created",
        "fingerprint",
        "include_usage",
        "kind",
        "model",
        "n_in",
        "request_id",
    )

    def __init__(
        self,
        *,
        kind: Kind,
        request_id: str,
        model: str,
        n_in: int,
        include_usage: bool,
        continuous: bool,
        fingerprint: str,
    ) -> None:
        self.kind = kind
        self.request_id = request_id
        self.model = model
        self.created = int(time.time())
        self.n_in = n_in
        self.fingerprint = fingerprint
        self.include_usage = include_usage
        self.continuous = continuous
        self._fingerprint = orjson.dumps(fingerprint)
        obj = b"chat.completion.chunk" if kind == "chat" else b"text_completion"
        self._head = (
            b'data: {"id":'
            + orjson.dumps(request_id)
            + b',"object":"'
            + obj
            + b'","created":'
            + str(self.created).encode()
            + b',"model":'
            + orjson.dumps(model)
        )
        self._usage_tail = b',"completion_tokens_details":null}' if kind == "chat" else b"}"

    def _usage(self, completion_tokens: int, tail: bytes) -> bytes:
        n_in = self.n_in
        return b',"usage":{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":%d%s' % (
            n_in,
            n_in + completion_tokens,
            completion_tokens,
            tail,
        )

    def role_chunk(self) -> bytes:
        """Chat only: the first chunk, sent with the first token."""
        usage = self._usage(0, self._usage_tail) if self.continuous else b""
        return (
            self._head
            + b',"choices":[{"index":0,"delta":{"role":"assistant","content":""},'
            + b'"logprobs":null,"finish_reason":null}]'
            + usage
            + b',"prompt_token_ids":null,"prompt_text":null}\n\n'
        )

    def token_chunk(
        self, text: str, completion_tokens: int, finish: str | None, stop_reason: str | None
    ) -> bytes:
        """The chunk of one engine step's tokens (``finish`` set on the last one)."""
        if self.kind == "chat":
            body = b',"choices":[{"index":0,"delta":{"content":' + orjson.dumps(text) + b"}"
        else:
            body = b',"choices":[{"index":0,"text":' + orjson.dumps(text)
        if finish is None:
            if self.kind == "chat":
                body += b',"logprobs":null,"finish_reason":null,"token_ids":null}]'
            else:
                body += (
                    b',"logprobs":null,"finish_reason":null,"stop_reason":null,'
                    b'"prompt_token_ids":null,"token_ids":null}]'
                )
        else:
            body += (
                b',"logprobs":null,"finish_reason":"'
                + finish.encode()
                + b'","stop_reason":'
                + orjson.dumps(stop_reason)
                + (b',"prompt_token_ids":null' if self.kind == "completion" else b"")
                + b',"token_ids":null}]'
            )
        if self.continuous:
            body += self._usage(completion_tokens, self._usage_tail)
        elif finish is not None and not self.include_usage:
            body += b',"system_fingerprint":' + self._fingerprint
        return self._head + body + b"}\n\n"

    def usage_chunk(self, completion_tokens: int) -> bytes:
        """The closing ``choices: []`` chunk with the totals (``include_usage``)."""
        return (
            self._head
            + b',"choices":[]'
            + self._usage(completion_tokens, b"}")
            + b',"system_fingerprint":'
            + self._fingerprint
            + b"}\n\n"
        )


def _usage_dict(n_in: int, n_out: int) -> dict[str, Any]:
    return {
        "prompt_tokens": n_in,
        "total_tokens": n_in + n_out,
        "completion_tokens": n_out,
        "prompt_tokens_details": None,
        "completion_tokens_details": None,
    }


def full_response(
    enc: ChunkEncoder, text: str, n_out: int, finish: str, stop_reason: str | None
) -> bytes:
    """The non-streaming answer (vLLM's ``model_dump()``: every field, nulls included)."""
    if enc.kind == "chat":
        choice: dict[str, Any] = {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": text,
                "refusal": None,
                "annotations": None,
                "audio": None,
                "function_call": None,
                "reasoning": None,
            },
            "logprobs": None,
            "finish_reason": finish,
            "stop_reason": stop_reason,
            "token_ids": None,
            "routed_experts": None,
        }
    else:
        choice = {
            "index": 0,
            "text": text,
            "logprobs": None,
            "finish_reason": finish,
            "stop_reason": stop_reason,
            "token_ids": None,
            "prompt_logprobs": None,
            "prompt_token_ids": None,
            "routed_experts": None,
        }
    out: dict[str, Any] = {
        "id": enc.request_id,
        "object": "chat.completion" if enc.kind == "chat" else "text_completion",
        "created": enc.created,
        "model": enc.model,
        "choices": [choice],
        "service_tier": None,
        "system_fingerprint": enc.fingerprint,
        "usage": _usage_dict(enc.n_in, n_out),
    }
    if enc.kind == "chat":
        out.update(prompt_logprobs=None, prompt_token_ids=None, prompt_text=None)
    out.update(kv_transfer_params=None, ec_transfer_params=None, metrics=None)
    return orjson.dumps(out)
