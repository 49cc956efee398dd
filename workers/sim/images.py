"""``POST /v1/images/generations`` on a simulated image-generation worker (OpenAI's shape).

Rule: a request for ``n`` images runs ``n`` sequences in the engine, batched with whatever
else is running as the profile's batching model says; the first carries the prompt's tokens
(the text encoders run once per request, as diffusers broadcasts the embeddings to every image)
and the others one, and each runs the model's ``steps`` denoising steps
(``workers.engine.diffusion``). The answer comes when the last image is done: ``data`` holds
one PNG of the requested size per image (a flat colour — the simulator times the work, it does
not paint), as ``b64_json`` or, for ``response_format: "url"``, a ``data:`` URL (nothing is
hosted), and ``usage`` counts ``input_tokens`` (the prompt, by the worker's one counting rule),
``output_tokens`` (``n · steps`` units) and ``images``/``steps``. Streaming is refused (400).
A client that leaves aborts every image of its request.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import io
import time
from dataclasses import dataclass
from typing import Any

import orjson
from PIL import Image

from workers.engine.diffusion import (
    GenerationError,
    GenerationRule,
    check_count,
    resolve_size,
)
from workers.sim.asgi import JSON, Receive, Send, send_bytes, wait_disconnect
from workers.sim.driver import EngineDriver, TokenStream
from workers.sim.errors import bad_request, invalid_field
from workers.sim.requests import check_model
from workers.sim.tokens import count_tokens

FORMATS = ("b64_json", "url")


@dataclass(frozen=True, slots=True)
class ImageRequest:
    """A validated image-generation request."""

    prompt_tokens: int
    n: int
    size: str
    response_format: str


def parse_image_request(
    body: dict[str, Any], served_model: str, rule: GenerationRule
) -> ImageRequest:
    """Validate ``body``; raises ``SimHTTPError`` (400 naming the field, 404 for the model)."""
    check_model(body, served_model)
    prompt = body.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise invalid_field("prompt", "string_type", "prompt must be a non-empty string", prompt)
    n = body.get("n", 1)
    if type(n) is not int:
        raise invalid_field("n", "int_type", "Input should be a valid integer", n)
    fmt = body.get("response_format") or "b64_json"
    if fmt not in FORMATS:
        raise bad_request(f"response_format must be one of {list(FORMATS)}", "response_format")
    if body.get("stream"):
        raise bad_request("Streaming image generation is not supported.", "stream")
    size = body.get("size")
    try:
        count = check_count(rule, n)
        chosen = resolve_size(rule, size if isinstance(size, str) else None)
    except GenerationError as exc:
        raise bad_request(str(exc), exc.param) from None
    if size is not None and not isinstance(size, str):
        raise invalid_field("size", "string_type", "Input should be a valid string", size)
    return ImageRequest(count_tokens(prompt), count, chosen, fmt)


@functools.lru_cache(maxsize=8)
def flat_png(size: str) -> str:
    """A flat-colour PNG of `size` (WIDTHxHEIGHT), base64-encoded (cached: one per size)."""
    width, height = (int(v) for v in size.split("x"))
    buf = io.BytesIO()
    Image.new("RGB", (width, height), (96, 128, 160)).save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode()


async def _wait_all(streams: list[TokenStream]) -> bool:
    """True when every stream finished; False when one was closed unfinished (aborted)."""
    for stream in streams:
        while not stream.finished:
            if not await stream.next_batch():
                return False
    return True


def answer(req: ImageRequest, steps: int) -> dict[str, Any]:
    """The response body for a finished request."""
    image = flat_png(req.size)
    if req.response_format == "url":
        key, value = "url", f"data:image/png;base64,{image}"
    else:
        key, value = "b64_json", image
    return {
        "created": int(time.time()),
        "data": [{key: value} for _ in range(req.n)],
        "usage": {
            "input_tokens": req.prompt_tokens,
            "output_tokens": req.n * steps,
            "total_tokens": req.prompt_tokens + req.n * steps,
            "input_tokens_details": {"text_tokens": req.prompt_tokens, "image_tokens": 0},
            "images": req.n,
            "steps": steps,
        },
    }


async def generate(
    driver: EngineDriver, req: ImageRequest, steps: int, rid: str, receive: Receive
) -> dict[str, Any] | None:
    """Run the request's images in the engine; its answer, or None if the client left."""
    streams: list[TokenStream] = []
    try:
        for k in range(req.n):
            n_in = req.prompt_tokens if k == 0 else 1
            streams.append(driver.submit(f"{rid}-{k}", n_in, steps, 0))
    except ValueError as exc:
        for s in streams:
            driver.abort(s.id)
        raise bad_request(str(exc)) from None

    def abort_all() -> None:
        for s in streams:
            driver.abort(s.id)

    watcher = asyncio.create_task(wait_disconnect(receive, abort_all))
    try:
        done = await _wait_all(streams)
    finally:
        watcher.cancel()
        for s in streams:
            if not s.finished:
                driver.abort(s.id)
    return answer(req, steps) if done else None


async def send_answer(send: Send, body: dict[str, Any]) -> None:
    """Write a finished request's answer."""
    await send_bytes(send, 200, orjson.dumps(body), JSON)
