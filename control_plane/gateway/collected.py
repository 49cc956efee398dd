"""A non-streamed answer, rebuilt from the worker's stream (the gateway always streams from
the worker, so it can count tokens and notice a client leaving).

Rule: everything a stream's chunks carry that a collected answer has is kept — text, the role,
tool calls (merged by their `index`: the first piece brings `id`, `type` and the function's
name, later ones append to its `arguments`), a reasoning parser's `reasoning_content`, and
log-probabilities (chat: the `content` entries in order; completions: each list of the
`logprobs` object extended in order). A field no chunk carried is absent or `null`, as in
vLLM's own non-streamed answer.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class Collected:
    """What the chunks of one choice carried, in order."""

    role: str = "assistant"
    pieces: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    tool_calls: dict[int, dict[str, Any]] = field(default_factory=dict)
    chat_logprobs: list[Any] | None = None
    text_logprobs: dict[str, list[Any]] | None = None

    def add(self, chunk: dict[str, Any], chat: bool) -> None:
        for choice in chunk.get("choices") or ():
            if chat:
                self._add_delta(choice.get("delta") or {})
            elif choice.get("text"):
                self.pieces.append(choice["text"])
            logprobs = choice.get("logprobs")
            if logprobs:
                self._add_logprobs(logprobs, chat)

    def _add_delta(self, delta: dict[str, Any]) -> None:
        if delta.get("role"):
            self.role = delta["role"]
        if delta.get("content"):
            self.pieces.append(delta["content"])
        if delta.get("reasoning_content"):
            self.reasoning.append(delta["reasoning_content"])
        for call in delta.get("tool_calls") or ():
            self._add_call(call)

    def _add_call(self, piece: dict[str, Any]) -> None:
        index = int(piece.get("index", 0))
        call = self.tool_calls.get(index)
        function = piece.get("function") or {}
        if call is None:
            call = self.tool_calls[index] = {
                "id": piece.get("id"),
                "type": piece.get("type", "function"),
                "function": {"name": function.get("name"), "arguments": ""},
            }
        if piece.get("id"):
            call["id"] = piece["id"]
        if function.get("name"):
            call["function"]["name"] = function["name"]
        call["function"]["arguments"] += str(function.get("arguments") or "")

    def _add_logprobs(self, logprobs: dict[str, Any], chat: bool) -> None:
        if chat:
            self.chat_logprobs = (self.chat_logprobs or []) + list(logprobs.get("content") or [])
            return
        merged = self.text_logprobs if self.text_logprobs is not None else {}
        for key, values in logprobs.items():
            merged.setdefault(key, []).extend(values or [])
        self.text_logprobs = merged

    def chat_choice(self, finish_reason: str | None) -> dict[str, Any]:
        text = "".join(self.pieces)
        message: dict[str, Any] = {"role": self.role, "content": text}
        if self.tool_calls:
            message["content"] = text or None
            message["tool_calls"] = [self.tool_calls[i] for i in sorted(self.tool_calls)]
        if self.reasoning:
            message["reasoning_content"] = "".join(self.reasoning)
        logprobs = None if self.chat_logprobs is None else {"content": self.chat_logprobs}
        return {
            "index": 0,
            "message": message,
            "logprobs": logprobs,
            "finish_reason": finish_reason,
        }

    def text_choice(self, finish_reason: str | None) -> dict[str, Any]:
        return {
            "index": 0,
            "text": "".join(self.pieces),
            "logprobs": self.text_logprobs,
            "finish_reason": finish_reason,
        }


def aggregate(
    collected: Collected,
    *,
    chat: bool,
    request_id: str,
    model: str,
    n_in: int,
    n_out: int,
    finish_reason: str | None,
    last_chunk: dict[str, Any] | None,
) -> dict[str, Any]:
    """One OpenAI-shaped (chat.)completion body from the relayed stream."""
    base = last_chunk or {}
    usage = {"prompt_tokens": n_in, "completion_tokens": n_out, "total_tokens": n_in + n_out}
    if chat:
        choice, obj = collected.chat_choice(finish_reason), "chat.completion"
    else:
        choice, obj = collected.text_choice(finish_reason), "text_completion"
    return {
        "id": base.get("id", request_id),
        "object": obj,
        "created": base.get("created", int(time.time())),
        "model": base.get("model", model),
        "choices": [choice],
        "usage": usage,
    }
