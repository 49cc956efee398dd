"""What a live replay sends for one request, by its model's kind, sized exactly as the scenario.

- `llm`: `/v1/completions`, a token-id prompt of exactly `n_in` tokens (`live_bench`).
- `vlm`: `/v1/chat/completions`, one user message with `k` 448×448 PNG images (real `data:`
  URLs the gateway measures and the worker counts by the profile's image rule) and filler words
  so that the worker counts exactly `n_in` prompt tokens (`workers.sim.tokens`'s rule): two
  images when the prompt has room for them and 100 text tokens, else one, else none — the
  scenario's "one or two images".
- `image`: `/v1/images/generations`, a prompt of exactly `n_in` tokens by the worker's rule and
  `n = n_out / steps` images (the scenario's output is the model's units: steps per image).
Both text shapes stream with usage, send the client's cap as `max_tokens` and the true length
as `min_tokens` (see `live_bench`); the control plane reads neither beyond the cap.
"""

from __future__ import annotations

import base64
import functools
import io
from typing import Any

from PIL import Image

from control_plane.sim.scenario import Scenario
from control_plane.sim.workload import RequestSpec
from workers.engine.profile import ModelInfo
from workers.engine.vision import ImageTokenRule, image_tokens
from workers.sim.tokens import count_chat_tokens, count_tokens

PROMPT_TOKEN = 1000
"""Token id repeated to build text prompts (any id below the vocabulary size works)."""
IMAGE_SIDE = 448
WORD = "sit"
"""A filler word: one token under the simulated worker's rule (whitespace free) and, with its
space, one under the gateway's estimate (4 characters), so the door neither over- nor
under-charges a replayed prompt."""
_TEXT_ROOM = 100


@functools.lru_cache(maxsize=1)
def image_url() -> str:
    """A 448×448 PNG as a `data:` URL (made once)."""
    buf = io.BytesIO()
    Image.new("RGB", (IMAGE_SIDE, IMAGE_SIDE), (40, 90, 160)).save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def _message(words: int, images: int) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = [{"type": "text", "text": " ".join([WORD] * words)}]
    parts += [{"type": "image_url", "image_url": {"url": image_url()}} for _ in range(images)]
    return [{"role": "user", "content": parts}]


def vlm_messages(n_in: int, rule: ImageTokenRule) -> list[dict[str, Any]]:
    """Chat messages the worker counts as exactly `n_in` prompt tokens (see the module)."""
    per_image = image_tokens(rule, IMAGE_SIDE, IMAGE_SIDE)

    def counted(images: int) -> int:
        return count_chat_tokens(_message(0, images), lambda _part: per_image)

    for images in (2, 1, 0):
        base = counted(images)
        if n_in - base >= (_TEXT_ROOM if images == 2 else 0):
            return _message(n_in - base, images)
    raise ValueError(f"a prompt of {n_in} tokens is shorter than the chat template")


def image_prompt(n_in: int) -> str:
    """A prompt of exactly `n_in` tokens (with BOS) by the worker's rule."""
    if n_in < 2:
        return WORD
    text = " ".join([WORD] * (n_in - 1))
    assert count_tokens(text) == n_in
    return text


def chat_body(spec: RequestSpec, model: str, rule: ImageTokenRule) -> dict[str, Any]:
    """The streamed chat body of a VLM request."""
    return {
        "model": model,
        "messages": vlm_messages(spec.n_in, rule),
        "max_tokens": spec.cap,
        "min_tokens": spec.n_out,
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def images_body(spec: RequestSpec, model: str, steps: int) -> dict[str, Any]:
    """The body of an image-generation request (`n_out` must be whole images of `steps`)."""
    if spec.n_out % steps:
        raise ValueError(f"{spec.id}: {spec.n_out} output units are not whole {steps}-step images")
    return {"model": model, "prompt": image_prompt(spec.n_in), "n": spec.n_out // steps}


def model_infos(scenario: Scenario) -> dict[str, ModelInfo]:
    """Scenario model name → what its profile declares (kind, image rule, generation rule)."""
    return {scenario.profile(g).model.name: scenario.profile(g).model for g in scenario.cluster}


def request_shape(
    spec: RequestSpec, served: str, info: ModelInfo | None
) -> tuple[str, dict[str, Any]]:
    """`(path, body)` of `spec` for its model's kind (see the module docstring)."""
    if info is not None and info.kind == "image":
        steps = info.generation.steps if info.generation else 28
        return "/v1/images/generations", images_body(spec, served, steps)
    if info is not None and info.kind == "vlm" and info.image_tokens is not None:
        return "/v1/chat/completions", chat_body(spec, served, info.image_tokens)
    return "/v1/completions", text_body(spec, served)


def text_body(spec: RequestSpec, model: str) -> dict[str, Any]:
    """The streamed completion of a text request: a token-id prompt of exactly `n_in`."""
    return {
        "model": model,
        "prompt": [PROMPT_TOKEN] * spec.n_in,
        "max_tokens": spec.cap,
        "min_tokens": spec.n_out,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
