"""Liveness, readiness and Prometheus metrics of a gateway."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from control_plane.api.auth import require_metrics_token
from control_plane.state import StateUnavailable, ping

router = APIRouter(tags=["health"])
PROBE_TIMEOUT_S = 1.0


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(request: Request) -> Response:
    """Ready when Redis answers (within `PROBE_TIMEOUT_S`) and a scheduler leader holds the lease.

    Either missing means requests cannot be scheduled now: 503 + Retry-After, with the reason.
    """
    state = request.app.state
    body: dict[str, Any] = {"gateway_id": state.gateway_id}
    try:
        async with asyncio.timeout(PROBE_TIMEOUT_S):
            await ping(state.stores.redis)
            leader = await state.stores.lease.holder()
    except (StateUnavailable, TimeoutError) as exc:
        reason = str(exc) or f"redis did not answer within {PROBE_TIMEOUT_S}s"
        return _not_ready({**body, "redis": "unavailable", "reason": reason})
    body.update(redis="ok", leader=leader)
    waiter = state.gateway.d.waiter
    if waiter is not None and waiter.leader is not None:
        body["seconds_without_leader"] = round(waiter.leader.seconds_without_leader(), 3)
    if leader is None:
        return _not_ready({**body, "reason": "no scheduler leader holds the lease"})
    return JSONResponse({"status": "ready", **body})


def _not_ready(body: dict[str, Any]) -> JSONResponse:
    return JSONResponse(
        {"status": "unavailable", **body}, status_code=503, headers={"Retry-After": "1"}
    )


@router.get("/metrics", dependencies=[Depends(require_metrics_token)])
async def metrics(request: Request) -> Response:
    """Prometheus text; needs `ARBITER_METRICS_TOKEN` as a bearer token when one is set."""
    return Response(
        generate_latest(request.app.state.metrics.registry), media_type=CONTENT_TYPE_LATEST
    )
