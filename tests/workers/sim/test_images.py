"""The simulated image worker through the real `openai` client: OpenAI's answer shape, usage as
images × steps, images batched in the engine, and errors naming the field."""

from __future__ import annotations

import asyncio
import base64
import io
from collections.abc import AsyncIterator

import httpx
import openai
import pytest
from PIL import Image

from workers.sim.app import create_app
from workers.sim.config import SimConfig

SPEED = 20.0


@pytest.fixture
async def client() -> AsyncIterator[openai.AsyncOpenAI]:
    config = SimConfig(speed=SPEED, profile="sd-image-a100")
    transport = httpx.ASGITransport(app=create_app(config))
    async with httpx.AsyncClient(transport=transport, base_url="http://sim/v1") as http:
        yield openai.AsyncOpenAI(
            base_url="http://sim/v1", api_key="x", http_client=http, max_retries=0
        )


async def test_answer_has_n_images_of_the_size_and_usage_in_units(
    client: openai.AsyncOpenAI,
) -> None:
    out = await client.images.generate(model="sd3-medium", prompt="a quiet harbour", n=3)
    assert len(out.data) == 3
    image = Image.open(io.BytesIO(base64.b64decode(out.data[2].b64_json or "")))
    assert image.size == (1024, 1024) and image.format == "PNG"
    assert out.usage is not None
    assert (out.usage.input_tokens, out.usage.output_tokens) == (4, 3 * 28)
    assert out.usage.total_tokens == 4 + 84
    url = await client.images.generate(model="sd3-medium", prompt="x", response_format="url")
    assert (url.data[0].url or "").startswith("data:image/png;base64,")


async def test_images_run_side_by_side_in_the_engine() -> None:
    app = create_app(SimConfig(speed=SPEED, profile="sd-image-a100"))
    engine = app.worker.driver.engine
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://sim") as http:
        body = {"model": "sd3-medium", "prompt": "a cat", "n": 3}
        calls = [asyncio.ensure_future(http.post("/v1/images/generations", json=body))]
        calls.append(asyncio.ensure_future(http.post("/v1/images/generations", json=body)))
        peak = 0
        while not all(c.done() for c in calls):
            peak = max(peak, engine.num_running)
            await asyncio.sleep(0.01)
    assert [c.result().status_code for c in calls] == [200, 200]
    assert peak == 6  # every image of both requests in one batch (max_num_seqs 8)


async def test_bad_requests_are_400s_naming_the_field(client: openai.AsyncOpenAI) -> None:
    for kwargs, param in [
        ({"prompt": "a cat", "size": "256x256"}, "size"),
        ({"prompt": "a cat", "n": 11}, "n"),
        ({"prompt": "  "}, "prompt"),
        ({"prompt": "a cat", "response_format": "png"}, "response_format"),
    ]:
        with pytest.raises(openai.BadRequestError) as err:
            await client.images.generate(model="sd3-medium", **kwargs)  # type: ignore[arg-type]
        body = err.value.body
        assert isinstance(body, dict), body
        assert str(body["param"]).removeprefix("body.") == param, (kwargs, body)
    with pytest.raises(openai.NotFoundError):
        await client.images.generate(model="other", prompt="a cat")


async def test_an_image_worker_refuses_text_and_a_text_worker_refuses_images() -> None:
    transport = httpx.ASGITransport(app=create_app(SimConfig(profile="sd-image-a100")))
    async with httpx.AsyncClient(transport=transport, base_url="http://sim") as http:
        chat = {"model": "sd3-medium", "messages": [{"role": "user", "content": "hi"}]}
        resp = await http.post("/v1/chat/completions", json=chat)
        assert resp.status_code == 400 and "images/generations" in resp.json()["error"]["message"]
    transport = httpx.ASGITransport(app=create_app(SimConfig(profile="tiny-cpu")))
    async with httpx.AsyncClient(transport=transport, base_url="http://sim") as http:
        resp = await http.post("/v1/images/generations", json={"prompt": "a cat"})
        assert resp.status_code == 400 and "does not generate" in resp.json()["error"]["message"]
