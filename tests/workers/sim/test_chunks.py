"""SSE chunks and whole answers, byte for byte as vLLM 0.32's pydantic models serialise them.

The expected strings were produced by vLLM's own ``ChatCompletionStreamResponse`` /
``CompletionStreamResponse`` / ``*Response`` classes, built the way its serving code builds them
(``model_dump_json(exclude_unset=True)`` for chunks, ``model_dump()`` for whole answers).
"""

from __future__ import annotations

import orjson

from workers.sim.chunks import DONE, ChunkEncoder, full_response
from workers.sim.requests import Kind


def encoder(kind: Kind, *, usage: bool, continuous: bool) -> ChunkEncoder:
    prefix = "chatcmpl-x" if kind == "chat" else "cmpl-x"
    return ChunkEncoder(
        kind=kind,
        request_id=prefix,
        model="m",
        n_in=5,
        include_usage=usage,
        continuous=continuous,
        fingerprint="fp",
    )


def sse(enc: ChunkEncoder, chunk: bytes) -> str:
    text = chunk.decode()
    assert text.startswith("data: ") and text.endswith("\n\n")
    return text[6:-2].replace(f'"created":{enc.created}', '"created":1')


CHAT_HEAD = '{"id":"chatcmpl-x","object":"chat.completion.chunk","created":1,"model":"m","choices":'
CMPL_HEAD = '{"id":"cmpl-x","object":"text_completion","created":1,"model":"m","choices":'


def test_chat_chunks() -> None:
    enc = encoder("chat", usage=False, continuous=False)
    assert sse(enc, enc.role_chunk()) == CHAT_HEAD + (
        '[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,'
        '"finish_reason":null}],"prompt_token_ids":null,"prompt_text":null}'
    )
    assert sse(enc, enc.token_chunk("hi", 1, None, None)) == CHAT_HEAD + (
        '[{"index":0,"delta":{"content":"hi"},"logprobs":null,"finish_reason":null,'
        '"token_ids":null}]}'
    )
    assert sse(enc, enc.token_chunk("hi", 3, "length", None)) == CHAT_HEAD + (
        '[{"index":0,"delta":{"content":"hi"},"logprobs":null,"finish_reason":"length",'
        '"stop_reason":null,"token_ids":null}],"system_fingerprint":"fp"}'
    )


def test_chat_usage_chunks() -> None:
    enc = encoder("chat", usage=True, continuous=True)
    assert sse(enc, enc.role_chunk()) == CHAT_HEAD + (
        '[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,'
        '"finish_reason":null}],"usage":{"prompt_tokens":5,"total_tokens":5,'
        '"completion_tokens":0,"completion_tokens_details":null},"prompt_token_ids":null,'
        '"prompt_text":null}'
    )
    assert sse(enc, enc.usage_chunk(3)) == CHAT_HEAD + (
        '[],"usage":{"prompt_tokens":5,"total_tokens":8,"completion_tokens":3},'
        '"system_fingerprint":"fp"}'
    )
    assert DONE == b"data: [DONE]\n\n"


def test_completion_chunks() -> None:
    enc = encoder("completion", usage=True, continuous=True)
    assert sse(enc, enc.token_chunk("hi", 1, None, None)) == CMPL_HEAD + (
        '[{"index":0,"text":"hi","logprobs":null,"finish_reason":null,"stop_reason":null,'
        '"prompt_token_ids":null,"token_ids":null}],'
        '"usage":{"prompt_tokens":5,"total_tokens":6,"completion_tokens":1}}'
    )
    assert sse(enc, enc.usage_chunk(3)) == CMPL_HEAD + (
        '[],"usage":{"prompt_tokens":5,"total_tokens":8,"completion_tokens":3},'
        '"system_fingerprint":"fp"}'
    )


def test_full_answers() -> None:
    chat = orjson.loads(full_response(encoder("chat", usage=False, continuous=False),
                                      "hi", 3, "length", None))  # fmt: skip
    chat["created"] = 1
    assert chat == {
        "id": "chatcmpl-x", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi",
                     "refusal": None, "annotations": None, "audio": None,
                     "function_call": None, "reasoning": None},
                     "logprobs": None, "finish_reason": "length", "stop_reason": None,
                     "token_ids": None, "routed_experts": None}],
        "service_tier": None, "system_fingerprint": "fp",
        "usage": {"prompt_tokens": 5, "total_tokens": 8, "completion_tokens": 3,
                  "prompt_tokens_details": None, "completion_tokens_details": None},
        "prompt_logprobs": None, "prompt_token_ids": None, "prompt_text": None,
        "kv_transfer_params": None, "ec_transfer_params": None, "metrics": None,
    }  # fmt: skip
    cmpl = orjson.loads(full_response(encoder("completion", usage=False, continuous=False),
                                      "hi", 3, "stop", "x"))  # fmt: skip
    assert list(cmpl) == [
        "id", "object", "created", "model", "choices", "service_tier", "system_fingerprint",
        "usage", "kv_transfer_params", "ec_transfer_params", "metrics",
    ]  # fmt: skip
    assert list(cmpl["choices"][0]) == [
        "index", "text", "logprobs", "finish_reason", "stop_reason", "token_ids",
        "prompt_logprobs", "prompt_token_ids", "routed_experts",
    ]  # fmt: skip
    assert cmpl["choices"][0]["stop_reason"] == "x"
