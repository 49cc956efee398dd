"""A non-streamed answer rebuilt from the worker's chunks keeps what vLLM's own would hold:
tool calls merged by index, reasoning, and log-probabilities (before: text and role only, so
a tool call came back as `finish_reason: tool_calls` with no call)."""

from __future__ import annotations

from typing import Any

from control_plane.gateway.relay import StreamStats, aggregate, collect_piece


def chunk(delta: dict[str, Any], logprobs: Any = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "logprobs": logprobs}]}


def collected(chunks: list[dict[str, Any]], chat: bool = True) -> dict[str, Any]:
    stats = StreamStats()
    for c in chunks:
        collect_piece(c, stats, chat)
    stats.n_in, stats.n_out, stats.finish_reason = 5, 9, "tool_calls" if chat else "length"
    return aggregate(stats, chat=chat, request_id="r1", model="m")["choices"][0]


def test_tool_calls_are_merged_by_index() -> None:
    choice = collected(
        [
            chunk({"role": "assistant"}),
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "call_a",
                            "type": "function",
                            "function": {"name": "add", "arguments": '{"a": '},
                        }
                    ]
                }
            ),
            chunk({"tool_calls": [{"index": 1, "id": "call_b", "function": {"name": "neg"}}]}),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]}),
            chunk({"tool_calls": [{"index": 1, "function": {"arguments": "{}"}}]}),
        ]
    )
    assert choice["message"] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_a",
                "type": "function",
                "function": {"name": "add", "arguments": '{"a": 1}'},
            },
            {"id": "call_b", "type": "function", "function": {"name": "neg", "arguments": "{}"}},
        ],
    }
    assert choice["finish_reason"] == "tool_calls" and choice["logprobs"] is None


def test_chat_logprobs_and_reasoning_are_kept_in_order() -> None:
    first = {"token": "Hi", "logprob": -0.1, "top_logprobs": []}
    second = {"token": "!", "logprob": -0.2, "top_logprobs": []}
    choice = collected(
        [
            chunk({"reasoning_content": "think"}),
            chunk({"content": "Hi"}, {"content": [first]}),
            chunk({"content": "!"}, {"content": [second]}),
        ]
    )
    assert choice["message"] == {
        "role": "assistant",
        "content": "Hi!",
        "reasoning_content": "think",
    }
    assert choice["logprobs"] == {"content": [first, second]}


def test_completion_logprobs_lists_are_extended() -> None:
    pieces = [
        {
            "choices": [
                {"index": 0, "text": "a", "logprobs": {"tokens": ["a"], "token_logprobs": [-1.0]}}
            ]
        },
        {
            "choices": [
                {"index": 0, "text": "b", "logprobs": {"tokens": ["b"], "token_logprobs": [-2.0]}}
            ]
        },
    ]
    choice = collected(pieces, chat=False)
    assert choice["text"] == "ab"
    assert choice["logprobs"] == {"tokens": ["a", "b"], "token_logprobs": [-1.0, -2.0]}
