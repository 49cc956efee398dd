"""Prompt-size estimate used for scheduling before the worker reports exact usage.

Rule: one token per 4 UTF-8 characters of text (rounded up), plus 4 tokens of chat-template
overhead per message, plus 8 tokens per image part (counted properly by the worker later).
Token-id prompts count exactly. The estimate only orders and prices the queue; the charge for
input is corrected to the worker's `usage.prompt_tokens` when the request completes.
"""

from __future__ import annotations

from typing import Any

from control_plane.gateway.schemas import ChatCompletionRequest, CompletionRequest

_CHARS_PER_TOKEN = 4
_MESSAGE_OVERHEAD = 4
_IMAGE_PART = 8


def _text_tokens(text: str) -> int:
    return -(-len(text) // _CHARS_PER_TOKEN)


def _content_tokens(content: str | list[dict[str, Any]] | None) -> int:
    if content is None:
        return 0
    if isinstance(content, str):
        return _text_tokens(content)
    total = 0
    for part in content:
        if part.get("type") == "text":
            total += _text_tokens(str(part.get("text", "")))
        else:
            total += _IMAGE_PART
    return total


def estimate_prompt_tokens(body: ChatCompletionRequest | CompletionRequest) -> int:
    """Estimated prompt tokens of a validated request (never below 1)."""
    if isinstance(body, ChatCompletionRequest):
        n = sum(_content_tokens(m.content) + _MESSAGE_OVERHEAD for m in body.messages)
        return max(1, n)
    prompt = body.prompt
    if isinstance(prompt, str):
        return max(1, _text_tokens(prompt))
    first = prompt[0]
    if isinstance(first, int):
        return len(prompt)
    if isinstance(first, list):
        return max(1, len(first))
    return max(1, _text_tokens(str(first)))
