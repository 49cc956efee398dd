"""Images through the whole path (real processes, the official OpenAI client): the model
registry declares Qwen2-VL's image rule (`arbiter up`'s seeding from the profile), the gateway
estimates each image by it, and the simulated VLM worker's `usage.prompt_tokens` — counted by
the same rule — agrees with the estimate within 5 %; an unreadable or remote image is a 400 in
OpenAI's shape naming the part, and nothing is queued for it."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest

from control_plane.gateway.schemas import ChatCompletionRequest
from control_plane.gateway.tokens import estimate_prompt_tokens
from tests.support.cluster import Cluster
from tests.workers.engine.test_vision import data_url
from workers.engine.vision import ImageTokenRule

PROFILE = "qwen2-vl-7b-a100"
MODEL = "qwen2-vl-7b"


def messages(*urls: str) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = [{"type": "text", "text": "What do these images show?"}]
    parts += [{"type": "image_url", "image_url": {"url": u}} for u in urls]
    return [{"role": "user", "content": parts}]


@pytest.fixture
def deployed(cluster: Cluster) -> tuple[str, str, str]:
    keys = cluster.tenants(["acme"])
    cluster.start_worker(profile=PROFILE, speed=50.0)
    cluster.start_scheduler()
    return cluster.start_gateway(), keys["acme"], cluster.admin_token


def test_image_prompts_are_estimated_as_the_worker_counts_them(
    deployed: tuple[str, str, str],
) -> None:
    gw, key, token = deployed
    models = httpx.get(f"{gw}/admin/models", headers={"Authorization": f"Bearer {token}"})
    rule = ImageTokenRule.model_validate(
        next(m for m in models.json()["data"] if m["name"] == MODEL)["image_tokens"]
    )
    client = openai.OpenAI(base_url=f"{gw}/v1", api_key=key)
    for sizes in ([(448, 448)], [(1024, 768), (640, 480)], [(1920, 1080), (32, 32), (800, 200)]):
        msgs = messages(*(data_url(w, h) for w, h in sizes))
        out = client.chat.completions.create(model=MODEL, messages=msgs, max_tokens=4)  # type: ignore[arg-type]
        assert out.usage is not None
        body = ChatCompletionRequest.model_validate({"model": MODEL, "messages": msgs})
        estimate = estimate_prompt_tokens(body, rule)
        assert abs(estimate - out.usage.prompt_tokens) <= 0.05 * out.usage.prompt_tokens, sizes


def test_unreadable_and_remote_images_are_refused_naming_the_part(
    deployed: tuple[str, str, str],
) -> None:
    gw, key, _ = deployed
    client = openai.OpenAI(base_url=f"{gw}/v1", api_key=key, max_retries=0)
    for url, why in [
        ("data:image/png;base64,AAAA", "cannot be read"),
        ("https://example.com/cat.png", "data: URLs"),
    ]:
        with pytest.raises(openai.BadRequestError) as err:
            client.chat.completions.create(model=MODEL, messages=messages(url), max_tokens=4)  # type: ignore[arg-type]
        body = err.value.body
        assert isinstance(body, dict) and body["param"] == "messages[0].content[1].image_url"
        assert why in body["message"] and body["code"] == "invalid_image"
