"""Bearer authentication: API keys → tenant, admin and operator tokens (with roles), and the
metrics token.

Failed API-key authentications are rate limited per client IP and per gateway; the rule is in
`control_plane.gateway.auth_limit`. Every refusal is counted in `arbiter_gateway_rejected`.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from typing import Annotated, Protocol

from fastapi import Depends, Request

from control_plane.api.operator_auth import OperatorTokens, Principal, allowed, needed_role
from control_plane.gateway.auth_limit import FailedAuthLimiter
from control_plane.gateway.errors import ApiError


class KeyResolver(Protocol):
    async def tenant_for_key(self, api_key: str) -> str | None: ...

    def vouched(self, api_key: str) -> bool:
        """The key was seen valid recently: the failed-auth limiter lets it through."""
        ...


class RefusalCounter(Protocol):
    def refused(self, reason: str) -> None: ...


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
    """The tenant owning the presented API key; 401 for unknown or revoked keys, 429
    `too_many_auth_failures` (no lookup at all) while this client or this gateway has failed
    too often and the key is not one recently seen valid."""
    state = request.app.state
    resolver: KeyResolver = state.keys
    limiter: FailedAuthLimiter = state.auth_limiter
    ip = request.client.host if request.client else "unknown"
    # Requests that present a key whose first lookup is already in flight join that lookup
    # (the directory is single-flight) without a charge of their own: a burst of concurrent
    # first calls with one valid key costs one token, refunded, not one each.
    charging: set[bytes] = state.auth_charging
    digest = hashlib.sha256(token.encode()).digest()
    limited = not resolver.vouched(token) and digest not in charging
    if limited:
        if retry := limiter.begin(ip, time.monotonic()):
            raise _refused(state.metrics, _too_many_failures(retry))
        charging.add(digest)
    try:
        tenant = await resolver.tenant_for_key(token)
    except BaseException:
        if limited:  # SQL down, client gone...: not an authentication failure
            limiter.refund(ip, time.monotonic())
        raise
    finally:
        if limited:
            charging.discard(digest)
    if tenant is None:
        raise _refused(
            state.metrics,
            ApiError(
                401,
                "Incorrect or revoked API key.",
                code="invalid_api_key",
                headers={"WWW-Authenticate": "Bearer"},
            ),
        )
    if limited:
        limiter.refund(ip, time.monotonic())
    return tenant


def _too_many_failures(retry_after_s: int) -> ApiError:
    return ApiError(
        429,
        "Too many failed authentication attempts from this client or on this gateway; "
        f"retry in {retry_after_s} s with a valid API key.",
        code="too_many_auth_failures",
        headers={"Retry-After": str(retry_after_s)},
    )


def _refused(metrics: RefusalCounter, err: ApiError) -> ApiError:
    metrics.refused(err.code or "unknown")
    return err


async def authenticate_admin(request: Request, token: Annotated[str, Depends(bearer)]) -> Principal:
    """The caller of the admin API: the bootstrap `ARBITER_ADMIN_TOKEN` (role admin; its actor
    is the client's `X-Arbiter-Actor` header, else "admin") or an operator token (actor = the
    operator's name, whatever the client sends). 401 for an unknown or revoked token."""
    expected: str = request.app.state.settings.admin_token
    if not expected:
        raise ApiError(
            403,
            "The admin API is disabled (ARBITER_ADMIN_TOKEN is not set).",
            code="admin_disabled",
        )
    if hmac.compare_digest(token.encode(), expected.encode()):
        return Principal(request.headers.get("x-arbiter-actor", "admin"), "admin", bootstrap=True)
    who = await operator_tokens(request).principal(token)
    if who is None:
        raise ApiError(
            401,
            "Incorrect or revoked admin token.",
            code="invalid_admin_token",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return who


def operator_tokens(request: Request) -> OperatorTokens:
    """This app's operator-token cache (created on first use)."""
    state = request.app.state
    tokens: OperatorTokens | None = getattr(state, "operator_tokens", None)
    if tokens is None:
        tokens = state.operator_tokens = OperatorTokens(state.db)
    return tokens


async def require_admin(
    request: Request, who: Annotated[Principal, Depends(authenticate_admin)]
) -> str:
    """Checks the caller's role against the route (403 `insufficient_role` naming the role
    needed); returns the actor name for the audit log."""
    route = "/admin" + getattr(request.scope.get("route"), "path", "").removeprefix("/admin")
    if not allowed(who.role, request.method, route):
        need = needed_role(request.method, route)
        raise ApiError(
            403,
            f"Operator {who.name!r} has role {who.role!r}; {request.method} {route} needs "
            f"role {need!r}. Ask an admin to grant it.",
            code="insufficient_role",
        )
    return who.name


async def require_metrics_token(request: Request) -> None:
    """When `ARBITER_METRICS_TOKEN` is set, `/metrics` needs it as a bearer token: 401 in
    OpenAI's error shape otherwise (Prometheus: `authorization: {credentials: <token>}`)."""
    expected: str = request.app.state.settings.metrics_token
    if not expected:
        return
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    matches = hmac.compare_digest(token.strip().encode(), expected.encode())
    if not (matches and scheme.lower() == "bearer"):
        raise ApiError(
            401,
            "Incorrect or missing metrics token: send 'Authorization: Bearer <token>'.",
            code="invalid_metrics_token",
            headers={"WWW-Authenticate": "Bearer"},
        )


Tenant = Annotated[str, Depends(current_tenant)]
Admin = Annotated[str, Depends(require_admin)]
Caller = Annotated[Principal, Depends(authenticate_admin)]
