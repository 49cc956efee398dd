"""`POST /v1/images/generations`: image generation through the same queue as text.

Rule: the body is OpenAI's (`model`, `prompt`, `n`, `size`, `response_format`; OpenAI's other
image fields are forwarded, anything else is dropped). Only a model the registry declares
`kind: image` generates images (400 naming `model` otherwise; the text endpoints refuse such a
model the same way). The job is sized by the model's generation rule
(`workers.engine.diffusion`): its prompt estimated as any text (one token per 4 characters; a
blank prompt or one longer than the model reads is a 400), its output `n · steps` units —
exact, since a denoising schedule has no end-of-sequence — and priced by the model's Unified
Token factor. It is queued, ordered, admitted and placed as a text request is; the worker's
JSON answer is relayed as it is, and its `usage` (`input_tokens`, `output_tokens`) replaces the
estimate in the completion event, which also records the images generated. A client that
leaves while its images are generated has its worker connection closed (the worker aborts
them) and the request ends `aborted`.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import aiohttp
import orjson
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from control_plane.contracts.events import WorkerFailed
from control_plane.gateway.deps import GatewayDeps, ModelEntry
from control_plane.gateway.door import door_job, slo_for
from control_plane.gateway.errors import ApiError
from control_plane.gateway.flight import Flight
from control_plane.gateway.identity import NodeInfo
from control_plane.gateway.tags import RequestTags
from control_plane.gateway.tokens import text_tokens
from workers.engine.diffusion import (
    MAX_IMAGES,
    GenerationError,
    GenerationRule,
    check_count,
    output_units,
    resolve_size,
)

IMAGES_PATH = "/v1/images/generations"
FORWARDED = frozenset(
    {"model", "prompt", "n", "size", "response_format", "quality", "style", "user",
     "background", "output_format", "output_compression", "moderation"}
)  # fmt: skip
"""OpenAI's image fields, the only ones the worker receives: nothing a client adds (a worker
priority, a step count that would make the job larger than it was queued as) gets through."""
Finish = Callable[[Flight, str, str | None], Awaitable[None]]


class ImageGenerationRequest(BaseModel):
    """OpenAI's image-generation body, as far as Arbiter checks it (see `FORWARDED`)."""

    model_config = ConfigDict(extra="allow")

    model: StrictStr = Field(min_length=1, max_length=256, examples=["sd3-medium"])
    prompt: StrictStr = Field(min_length=1, max_length=32_000, examples=["a red fox in snow"])
    n: StrictInt = Field(default=1, ge=1, le=MAX_IMAGES)
    size: StrictStr | None = Field(default=None, max_length=32, examples=["1024x1024"])
    response_format: Literal["url", "b64_json"] | None = None
    stream: StrictBool = False
    user: StrictStr | None = None
    metadata: dict[str, Any] | None = None


def refuse_text_model(model: ModelEntry) -> None:
    """400 naming `model` when an image request names a model that does not generate images."""
    if not model.generates_images:
        raise ApiError(
            400,
            f"The model {model.name!r} does not generate images (its kind is {model.kind!r}); "
            "use /v1/chat/completions or /v1/completions.",
            param="model",
            code="model_not_supported",
        )


def refuse_image_model(model: ModelEntry) -> None:
    """400 naming `model` when a text request names an image-generation model."""
    if model.generates_images:
        raise ApiError(
            400,
            f"The model {model.name!r} generates images; use /v1/images/generations.",
            param="model",
            code="model_not_supported",
        )


def build_image_flight(
    d: GatewayDeps,
    body: ImageGenerationRequest,
    tags: RequestTags,
    node: NodeInfo,
    model: ModelEntry,
    received: float,
) -> Flight:
    """The flight of an accepted image request (see the module docstring)."""
    refuse_text_model(model)
    if body.stream:
        raise ApiError(400, "Streaming image generation is not supported.", param="stream")
    if not body.prompt.strip():
        raise ApiError(400, "prompt must not be blank.", param="prompt")
    n_in = max(1, text_tokens(body.prompt))
    limit = model.longest_context
    if limit is not None and n_in > limit:
        raise ApiError(
            400,
            f"The prompt is about {n_in} tokens; the model reads at most {limit}.",
            param="prompt",
        )
    rule = model.generation or GenerationRule()
    try:
        n = check_count(rule, body.n)
        size = resolve_size(rule, body.size)
    except GenerationError as exc:
        raise ApiError(400, str(exc), param=exc.param) from None
    units = output_units(rule, n)
    job = door_job(
        node, tags, model, body.model, received, n_in, units, tags.task, slo_for(d, node, tags)
    )
    raw = body.model_dump(exclude_none=True, exclude_unset=True)
    payload = {k: v for k, v in raw.items() if k in FORWARDED}
    payload.update(size=size, n=n)
    return Flight(
        job=job,
        node=node,
        chat=False,
        payload=payload,
        received_at=received,
        endpoint=IMAGES_PATH,
        read_timeout_s=d.settings.upstream_image_timeout_s,
    )


def _count(usage: dict[str, Any], key: str, default: int) -> int:
    value = usage.get(key)
    return value if type(value) is int and 0 <= value < 2**31 else default


async def read_images(flight: Flight, resp: aiohttp.ClientResponse) -> dict[str, Any]:
    """The worker's answer, its usage copied into the flight's stats; raises `ValueError`
    (or aiohttp's errors) when the answer is unreadable."""
    try:
        raw = await resp.read()
    finally:
        resp.release()
    body: dict[str, Any] = orjson.loads(raw)
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        raise ValueError("the worker's answer has no `data` list")
    usage = body.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    stats, now = flight.stats, time.time()
    stats.n_in = _count(usage, "input_tokens", flight.job.n_in)
    stats.n_out = _count(usage, "output_tokens", flight.job.max_tokens)
    stats.first_token_at = stats.finished_at = now
    stats.finish_reason = "stop"
    flight.images = len(data)
    return body


async def answer_images(
    flight: Flight,
    resp: aiohttp.ClientResponse,
    finish: Finish,
    emit: Callable[[WorkerFailed], object],
) -> Response:
    """Relay the worker's answer to an image request and finish its flight; a worker that
    fails the answer is reported (`emit`) as after a failed text answer, so the scheduler
    rests it for its cool-down."""
    try:
        body = await read_images(flight, resp)
    except (aiohttp.ClientError, OSError, ValueError) as exc:
        worker = flight.grant.worker_id if flight.grant else None
        emit(WorkerFailed(flight.id, worker, str(exc), time.time()))
        await finish(flight, "error", f"worker failed mid-answer: {exc}")
        raise ApiError(
            502, f"The worker failed while answering: {exc}", code="worker_failed"
        ) from None
    except BaseException:
        await finish(flight, "aborted", "client disconnected")
        raise
    await finish(flight, "ok", None)
    return JSONResponse(body, headers=flight.response_headers())
