"""The simulated VLM worker counts image parts by its profile's rule, through the real
`openai` client: `usage.prompt_tokens` = the text's tokens + each image's tokens."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import openai
import pytest

from tests.workers.engine.test_vision import data_url
from workers.engine import load_profile
from workers.engine.vision import image_tokens
from workers.sim.app import create_app
from workers.sim.config import SimConfig
from workers.sim.tokens import count_chat_tokens

RULE = load_profile("qwen2-vl-7b-a100").model.image_tokens


@pytest.fixture
async def client() -> AsyncIterator[openai.AsyncOpenAI]:
    config = SimConfig(speed=1000, profile="qwen2-vl-7b-a100", served_model_name="vl")
    transport = httpx.ASGITransport(app=create_app(config))
    async with httpx.AsyncClient(transport=transport, base_url="http://sim/v1") as http:
        yield openai.AsyncOpenAI(base_url="http://sim/v1", api_key="x", http_client=http)


def message(*sizes: tuple[int, int]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = [{"type": "text", "text": "What is in these pictures?"}]
    parts += [{"type": "image_url", "image_url": {"url": data_url(w, h)}} for w, h in sizes]
    return [{"role": "user", "content": parts}]


async def test_prompt_tokens_count_every_image_by_the_profile_rule(
    client: openai.AsyncOpenAI,
) -> None:
    assert RULE is not None
    sizes = [(448, 448), (1024, 768), (10, 10)]
    messages = message(*sizes)
    out = await client.chat.completions.create(model="vl", messages=messages, max_tokens=4)  # type: ignore[arg-type]
    assert out.usage is not None
    text_only = count_chat_tokens(message())
    images = sum(image_tokens(RULE, w, h) for w, h in sizes)
    assert images == (256 + 2) + (999 + 2) + (4 + 2)
    assert out.usage.prompt_tokens == text_only + images


def one_image(url: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]}]


async def test_an_unreadable_image_is_a_400_naming_messages(client: openai.AsyncOpenAI) -> None:
    bad = one_image("data:image/png;base64,AAAA")
    with pytest.raises(openai.BadRequestError) as err:
        await client.chat.completions.create(model="vl", messages=bad, max_tokens=4)  # type: ignore[arg-type]
    assert "cannot be read" in str(err.value) and "messages" in str(err.value)
    remote = one_image("https://example.com/a.png")
    with pytest.raises(openai.BadRequestError, match="data: image URLs"):
        await client.chat.completions.create(model="vl", messages=remote, max_tokens=4)  # type: ignore[arg-type]


async def test_tokenize_counts_images_as_usage_does() -> None:
    config = SimConfig(speed=1000, profile="qwen2-vl-7b-a100", served_model_name="vl")
    transport = httpx.ASGITransport(app=create_app(config))
    messages = message((448, 448), (1024, 768))
    async with httpx.AsyncClient(transport=transport, base_url="http://sim") as http:
        tok = (await http.post("/tokenize", json={"model": "vl", "messages": messages})).json()
        chat = {"model": "vl", "messages": messages, "max_tokens": 2}
        usage = (await http.post("/v1/chat/completions", json=chat)).json()["usage"]
    assert tok["count"] == len(tok["tokens"]) == usage["prompt_tokens"]
    assert tok["tokens"].count(0) == (256 + 2) + (999 + 2)
