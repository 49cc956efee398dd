"""Images at the door: a prompt whose images alone fill the longest context is refused before
it queues (vLLM would refuse it once it had taken a slot and been charged the estimate), and
no image estimate passes a 32-bit count."""

from __future__ import annotations

from typing import Any

import pytest

from control_plane.gateway.deps import ModelEntry
from control_plane.gateway.door import build_flight
from control_plane.gateway.errors import ApiError
from control_plane.gateway.schemas import ChatCompletionRequest
from control_plane.gateway.tags import RequestTags
from tests.control_plane.gateway.test_door import NODE, deps
from tests.workers.engine.test_vision import data_url
from workers.engine.vision import ImageTokenRule, image_tokens

QWEN = ImageTokenRule()
REMOTE = "https://img.example.com/a.png"


def flight(urls: list[str], rule: ImageTokenRule = QWEN, context: int | None = 4096) -> Any:
    parts: list[dict[str, Any]] = [{"type": "text", "text": "What are these?"}]
    parts += [{"type": "image_url", "image_url": {"url": u}} for u in urls]
    body = ChatCompletionRequest.model_validate(
        {"model": "vl", "messages": [{"role": "user", "content": parts}], "max_tokens": 8}
    )
    model = ModelEntry("vl", context, 1.0, longest_context=context, image_rule=rule)
    d = deps()
    d.settings.image_hosts = ["img.example.com"]
    return build_flight(d, body, RequestTags(), NODE, model, 0.0)


def test_images_that_alone_fill_the_context_are_refused_at_the_door() -> None:
    big = data_url(1400, 1400)  # 2502 tokens each
    assert image_tokens(QWEN, 1400, 1400) == 2502
    assert flight([big]).job.n_in > 2502  # one fits in 4096
    with pytest.raises(ApiError) as err:
        flight([big, big])
    assert (err.value.status, err.value.code, err.value.param) == (
        400, "context_length_exceeded", "messages",
    )  # fmt: skip
    assert "images of at least 5004 tokens" in err.value.message


def test_remote_images_are_refused_only_past_what_they_surely_cost() -> None:
    """A remote image is counted at the rule's largest (16,386 tokens), yet may be small:
    only as many as the context could not hold at one patch each are refused."""
    assert flight([REMOTE] * 1365).job.n_in > 4096  # at least 3 tokens each: 4095
    with pytest.raises(ApiError, match="maximum context length is 4096"):
        flight([REMOTE] * 1366)


def test_an_estimate_past_a_32_bit_count_is_a_400_not_a_job() -> None:
    """Before, a rule with a huge `max_pixels` (or many remote images) made a job whose
    `n_in` no SQL INTEGER column holds."""
    huge = ImageTokenRule(max_pixels=10**15)
    with pytest.raises(ApiError) as err:
        flight([REMOTE], huge, context=None)
    assert (err.value.status, err.value.param) == (400, "messages")
