"""Tenant request bodies: strict types where OpenAI refuses a mismatch, every number bounded."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from control_plane.gateway.schemas import ChatCompletionRequest, CompletionRequest

CHAT: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_tokens", 1e30),
        ("max_tokens", "5"),
        ("max_tokens", 2**31),
        ("max_tokens", 5.0),
        ("stream", "yes"),
        ("stream", 1),
        ("temperature", float("nan")),
        ("temperature", "0.5"),
        ("n", 2),
        ("min_tokens", -1),
        ("stop", [1]),
    ],
)
def test_chat_refuses(field: str, value: Any) -> None:
    with pytest.raises(ValidationError) as err:
        ChatCompletionRequest.model_validate({**CHAT, field: value})
    assert err.value.errors()[0]["loc"][0] == field


@pytest.mark.parametrize(
    "prompt",
    [[100000000000000000000], [-1], [[]], [], [[1], [2]], ["a", "b"], [True], 5, [1.5]],
)
def test_completion_refuses_bad_prompts_with_one_clear_error(prompt: Any) -> None:
    with pytest.raises(ValidationError) as err:
        CompletionRequest.model_validate({"model": "m", "prompt": prompt})
    (only,) = err.value.errors()
    assert only["loc"] == ("prompt",) and "token ids" in only["msg"]


@pytest.mark.parametrize("prompt", ["text", ["text"], [0, 2**31 - 1], [[1, 2]]])
def test_completion_accepts_openai_prompts(prompt: Any) -> None:
    assert CompletionRequest.model_validate({"model": "m", "prompt": prompt}).prompt == prompt


def test_chat_accepts_integral_numbers_for_floats() -> None:
    body = ChatCompletionRequest.model_validate({**CHAT, "temperature": 1, "max_tokens": 5})
    assert body.temperature == 1.0 and body.max_tokens == 5


@pytest.mark.parametrize(
    ("model", "body"),
    [
        (CompletionRequest, {"model": "m", "prompt": "x", "prompt_embeds": "UEsDBAAA"}),
        (ChatCompletionRequest, {**CHAT, "mm_processor_kwargs": {"min_pixels": 1}}),
        (ChatCompletionRequest, {**CHAT, "prompt_embeds": ["x"]}),
    ],
)
def test_fields_the_door_cannot_price_are_refused_by_name(model: Any, body: Any) -> None:
    """They were forwarded to vLLM as unknown fields: `prompt_embeds` a tensor the worker
    deserializes and the door cannot count, `mm_processor_kwargs` a client's own image
    processing that the door's image rule does not price."""
    with pytest.raises(ValidationError) as err:
        model.model_validate(body)
    (error,) = err.value.errors()
    name = next(k for k in ("prompt_embeds", "mm_processor_kwargs") if k in body)
    assert error["loc"] == (name,) and "not accepted here" in error["msg"]
    assert model.model_validate({**body, name: None}).model_dump(exclude_unset=True)[name] is None
