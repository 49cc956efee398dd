"""Bearer authentication: API keys → tenant, and the admin token."""

from __future__ import annotations

import hmac
from typing import Annotated, Protocol

from fastapi import Depends, Request

from control_plane.api.errors import ApiError


class KeyResolver(Protocol):
    async def tenant_for_key(self, api_key: str) -> str | None: ...


async def bearer(request: Request) -> str:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise ApiError(
            401,
            "Missing API key: send 'Authorization: Bearer <key>'.",
            code="missing_api_key",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return token.strip()


async def current_tenant(request: Request, token: Annotated[str, Depends(bearer)]) -> str:
    """The tenant owning the presented API key; 401 for unknown or revoked keys."""
    resolver: KeyResolver = request.app.state.keys
    tenant = await resolver.tenant_for_key(token)
    if tenant is None:
        raise ApiError(
            401,
            "Incorrect or revoked API key.",
            code="invalid_api_key",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return tenant


async def require_admin(request: Request, token: Annotated[str, Depends(bearer)]) -> str:
    """Checks the admin token in constant time; returns the actor name for the audit log."""
    expected: str = request.app.state.settings.admin_token
    if not expected:
        raise ApiError(
            403,
            "The admin API is disabled (ARBITER_ADMIN_TOKEN is not set).",
            code="admin_disabled",
        )
    if not hmac.compare_digest(token.encode(), expected.encode()):
        raise ApiError(
            401,
            "Incorrect admin token.",
            code="invalid_admin_token",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return request.headers.get("x-arbiter-actor", "admin")


Tenant = Annotated[str, Depends(current_tenant)]
Admin = Annotated[str, Depends(require_admin)]
