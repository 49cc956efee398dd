"""Prompt estimate, the relay's client-facing encoding, and non-stream aggregation."""

from __future__ import annotations

import orjson

from control_plane.gateway.proxy import upstream_payload
from control_plane.gateway.relay import StreamStats, aggregate, collect_piece
from control_plane.gateway.schemas import ChatCompletionRequest, CompletionRequest
from control_plane.gateway.tokens import estimate_prompt_tokens


def test_estimate_rules() -> None:
    chat = ChatCompletionRequest.model_validate(
        {"model": "m", "messages": [{"role": "user", "content": "x" * 40}]}
    )
    assert estimate_prompt_tokens(chat) == 10 + 4
    ids = CompletionRequest.model_validate({"model": "m", "prompt": [1, 2, 3]})
    assert estimate_prompt_tokens(ids) == 3
    text = CompletionRequest.model_validate({"model": "m", "prompt": "abcde"})
    assert estimate_prompt_tokens(text) == 2


def test_upstream_always_streams_with_usage() -> None:
    payload = upstream_payload(
        {"model": "m", "stream": False, "metadata": {"a": 1}, "priority": -100}, None
    )
    assert payload["stream"] is True
    assert payload["stream_options"] == {"include_usage": True}
    assert "metadata" not in payload and "priority" not in payload


def test_aggregate_chat_answer() -> None:
    stats = StreamStats()
    for piece in ("Hel", "lo"):
        collect_piece({"choices": [{"delta": {"content": piece}}]}, stats, chat=True)
    stats.n_in, stats.n_out, stats.finish_reason = 5, 2, "length"
    body = aggregate(stats, chat=True, request_id="r1", model="m")
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "Hello"}
    assert body["usage"] == {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}
    assert orjson.loads(orjson.dumps(body))["object"] == "chat.completion"
