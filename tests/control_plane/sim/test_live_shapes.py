"""What a live replay sends per model kind: exact prompt sizes by the worker's own counting
rule, real images for a VLM, whole images for an image model."""

from __future__ import annotations

import pytest

from control_plane.core.job import Slo
from control_plane.sim.live_shapes import (
    image_prompt,
    images_body,
    request_shape,
    vlm_messages,
)
from control_plane.sim.workload import RequestSpec
from workers.engine import load_profile
from workers.engine.vision import image_tokens
from workers.sim.tokens import count_chat_tokens, count_tokens

VLM = load_profile("qwen2-vl-7b-a100").model
IMAGE = load_profile("sd-image-a100").model
RULE = VLM.image_tokens


def spec(model: str, n_in: int, n_out: int) -> RequestSpec:
    return RequestSpec("r", 0.0, "t", "a", "g", model, None, None, n_in, n_out, Slo(), 0)


@pytest.mark.parametrize(("n_in", "images"), [(20, 0), (300, 1), (615, 1), (700, 2)])
def test_vlm_prompts_count_exactly_with_one_or_two_images(n_in: int, images: int) -> None:
    assert RULE is not None
    messages = vlm_messages(n_in, RULE)
    parts = messages[0]["content"]
    assert sum(p["type"] == "image_url" for p in parts) == images
    per_image = image_tokens(RULE, 448, 448)
    assert count_chat_tokens(messages, lambda _p: per_image) == n_in
    with pytest.raises(ValueError):
        vlm_messages(3, RULE)


def test_image_prompts_and_bodies_are_exact() -> None:
    for n in (2, 77):
        assert count_tokens(image_prompt(n)) == n
    assert count_tokens(image_prompt(1)) == 2  # BOS and one word: the shortest prompt
    assert images_body(spec("sd3-medium", 40, 56), "sd", 28)["n"] == 2
    with pytest.raises(ValueError):
        images_body(spec("sd3-medium", 40, 30), "sd", 28)


def test_the_shape_follows_the_models_kind() -> None:
    path, body = request_shape(spec("qwen2-vl-7b", 400, 50), "vl", VLM)
    assert path == "/v1/chat/completions" and body["min_tokens"] == 50 and body["stream"]
    path, body = request_shape(spec("sd3-medium", 40, 28), "sd", IMAGE)
    assert path == "/v1/images/generations" and body == {
        "model": "sd", "prompt": image_prompt(40), "n": 1
    }  # fmt: skip
    path, body = request_shape(spec("llama", 10, 5), "llama", None)
    assert path == "/v1/completions" and len(body["prompt"]) == 10
