"""`/admin/operators` (admin role): named operator accounts with a role and a revocable token
(shown once, in the create response only); `/admin/whoami`: the caller's name and role.

A creation or revocation takes effect on this gateway at once (its token cache is dropped)
and on the others within the cache TTL (2 s).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Request

from control_plane.admin import operators
from control_plane.admin.records import as_json
from control_plane.api.admin.deps import Ctx, in_thread
from control_plane.api.admin.schemas import Change
from control_plane.api.auth import Admin, Caller, operator_tokens
from control_plane.gateway.bounds import NAME_PATTERN, Name

router = APIRouter(tags=["admin: operators"])

OperatorName = Annotated[str, Path(pattern=NAME_PATTERN)]


class OperatorCreate(Change):
    """A new operator: a unique name and a role (viewer reads; operator also steers weights,
    knobs, policy and drain; admin does everything)."""

    name: Name
    role: Literal["viewer", "operator", "admin"] = "viewer"


@router.get("/whoami")
async def whoami(who: Caller) -> dict[str, Any]:
    """The caller: the name the audit log records, the role, and whether it is the shared
    bootstrap token."""
    return {"name": who.name, "role": who.role, "bootstrap": who.bootstrap}


@router.get("/operators")
async def list_operators(ctx: Ctx, _: Admin) -> dict[str, Any]:
    """Every operator (revoked ones too) with its display prefix; never a token or its hash."""
    return {"data": as_json(await in_thread(operators.list_operators, ctx.db))}


@router.post("/operators", status_code=201)
async def create_operator(
    ctx: Ctx, actor: Admin, body: OperatorCreate, request: Request
) -> dict[str, Any]:
    """A new operator; `token` is shown in this response only."""
    record, token = await in_thread(
        operators.create_operator,
        ctx.db,
        name=body.name,
        role=body.role,
        actor=actor,
        reason=body.reason,
    )
    operator_tokens(request).invalidate()
    return {**as_json(record), "token": token}


@router.post("/operators/{name}/revoke")
async def revoke_operator(
    ctx: Ctx, actor: Admin, name: OperatorName, body: Change, request: Request
) -> dict[str, Any]:
    """Revoke an operator's token: refused at once on this gateway, within 2 s elsewhere."""
    record = await in_thread(
        operators.revoke_operator, ctx.db, name=name, actor=actor, reason=body.reason
    )
    operator_tokens(request).invalidate()
    return {**as_json(record)}
