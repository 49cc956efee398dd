"""Liveness, readiness and Prometheus metrics of a gateway."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from control_plane.state import StateUnavailable, ping

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(request: Request) -> Response:
    """Ready when Redis answers and the grant reader is running."""
    try:
        await ping(request.app.state.stores.redis)
    except StateUnavailable as exc:
        return JSONResponse(
            {"status": "unavailable", "reason": str(exc)},
            status_code=503,
            headers={"Retry-After": "1"},
        )
    return JSONResponse({"status": "ready", "gateway_id": request.app.state.gateway_id})


@router.get("/metrics")
async def metrics(request: Request) -> Response:
    return Response(
        generate_latest(request.app.state.metrics.registry), media_type=CONTENT_TYPE_LATEST
    )
