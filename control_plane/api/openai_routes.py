"""Tenant API: OpenAI-compatible completions, models and the tenant's own usage."""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from control_plane.api.auth import Tenant
from control_plane.gateway.bounds import Epoch
from control_plane.gateway.images import ImageGenerationRequest
from control_plane.gateway.schemas import ChatCompletionRequest, CompletionRequest
from control_plane.gateway.service import Gateway

router = APIRouter(prefix="/v1", tags=["tenant"])


def _gateway(request: Request) -> Gateway:
    gateway: Gateway = request.app.state.gateway
    return gateway


@router.post("/chat/completions", response_model=None)
async def chat_completions(
    request: Request, body: ChatCompletionRequest, tenant: Tenant
) -> Response:
    return await _gateway(request).serve(request, body, tenant)


@router.post("/completions", response_model=None)
async def completions(request: Request, body: CompletionRequest, tenant: Tenant) -> Response:
    return await _gateway(request).serve(request, body, tenant)


@router.post("/images/generations", response_model=None)
async def images_generations(
    request: Request, body: ImageGenerationRequest, tenant: Tenant
) -> Response:
    """Generate images with an image model (OpenAI's shape), queued and scheduled as text is."""
    return await _gateway(request).serve_images(request, body, tenant)


@router.get("/models")
async def models(request: Request, tenant: Tenant) -> dict[str, Any]:
    served = await _gateway(request).d.catalog.served()
    now = int(time.time())
    return {
        "object": "list",
        "data": [
            {
                "id": m.name,
                "object": "model",
                "created": now,
                "owned_by": "arbiter",
                "max_model_len": m.max_model_len,
            }
            for m in served
        ],
    }


@router.get("/usage")
async def usage(
    request: Request,
    tenant: Tenant,
    since: Annotated[Epoch | None, Query(description="epoch seconds; default 30 days")] = None,
) -> dict[str, Any]:
    """The calling tenant's own usage (from SQL history); other tenants are never visible.

    Also `token_budget` (tokens per UTC day, None = unlimited) and `tokens_today` (counted
    against it since 00:00 UTC; None when the tenant has no budget).
    """
    start = since if since is not None else time.time() - 30 * 86400
    totals: dict[str, Any] = await request.app.state.usage.for_tenant(tenant, since=start)
    gateway = _gateway(request)
    info = await gateway.d.directory.tenant(tenant)
    budget = await gateway.d.limits.today(info, time.time())
    return {"object": "usage", "tenant": tenant, "since": start, **totals, **budget}
