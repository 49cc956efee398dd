"""`/admin/keys`: issue (the plaintext is in this one response only), list (prefixes), revoke.

A revocation takes effect on this gateway at once (its cache is dropped) and on the others
through the `directory` knob.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query

from control_plane.admin import tenancy
from control_plane.admin.records import as_json
from control_plane.api.admin.deps import Ctx, in_thread
from control_plane.api.admin.schemas import Change, KeyCreate
from control_plane.api.admin.sync import announce_directory
from control_plane.api.auth import Admin
from control_plane.gateway.bounds import INT32_MAX

router = APIRouter(tags=["admin: keys"])


@router.get("/keys")
async def list_keys(
    ctx: Ctx, _: Admin, tenant: Annotated[str | None, Query()] = None
) -> dict[str, Any]:
    """Every key (revoked ones too) with its display prefix; never a key or its hash."""
    return {"data": as_json(await in_thread(tenancy.list_keys, ctx.db, tenant=tenant))}


@router.post("/keys", status_code=201)
async def create_key(ctx: Ctx, actor: Admin, body: KeyCreate) -> dict[str, Any]:
    """A new key for `tenant`; `api_key` is shown in this response only."""
    record, key = await in_thread(
        tenancy.create_key,
        ctx.db,
        tenant=body.tenant,
        label=body.label,
        actor=actor,
        reason=body.reason,
    )
    warnings = await announce_directory(ctx)
    return {**as_json(record), "api_key": key, "warnings": warnings}


@router.post("/keys/{key_id}/revoke")
async def revoke_key(
    ctx: Ctx, actor: Admin, key_id: Annotated[int, Path(ge=1, le=INT32_MAX)], body: Change
) -> dict[str, Any]:
    """Revoke a key: it stops authenticating at once on this gateway, within seconds elsewhere."""
    record = await in_thread(
        tenancy.revoke_key, ctx.db, key_id=key_id, actor=actor, reason=body.reason
    )
    warnings = await announce_directory(ctx)
    return {**as_json(record), "warnings": warnings}
