"""`/admin/tenants…` and `/admin/weights…`: the tenant → application → agent hierarchy.

Every change is audited (see `tenancy.py`), then this gateway's directory cache is dropped,
other gateways are told through the `directory` knob, and a weight change is pushed to the
scheduler through the `weights` knob so that it applies at once.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from control_plane.admin import tenancy
from control_plane.admin.records import as_json
from control_plane.api.admin.deps import Ctx, Reason, conflict, in_thread
from control_plane.api.admin.schemas import (
    AgentCreate,
    AgentFields,
    AppCreate,
    Change,
    NodeFields,
    TenantCreate,
    TenantFields,
    WeightChange,
)
from control_plane.api.admin.sync import announce_directory, publish_weight
from control_plane.api.auth import Admin
from control_plane.gateway.errors import ApiError

router = APIRouter(tags=["admin: tenants"])


async def _changed(
    ctx: Ctx, path: tuple[str, ...], record: Any, changes: dict[str, Any], *, deleted: bool = False
) -> dict[str, Any]:
    warnings = await announce_directory(ctx)
    if deleted or "weight" in changes:
        warnings += await publish_weight(ctx, path)
    return {**as_json(record), "warnings": warnings}


async def _create(ctx: Ctx, actor: str, path: tuple[str, ...], body: Change) -> dict[str, Any]:
    fields = body.changes(exclude={"name"})
    record = await in_thread(
        tenancy.create_node, ctx.db, path, fields, actor=actor, reason=body.reason
    )
    return await _changed(ctx, path, record, fields)


async def _update(
    ctx: Ctx,
    actor: str,
    path: tuple[str, ...],
    body: Change,
    expected: dict[str, Any] | None = None,
) -> dict[str, Any]:
    changes = body.changes(exclude={"expected"})
    if not changes:
        raise ApiError(422, "Nothing to change: send at least one field.", code="empty_change")
    record = await in_thread(
        tenancy.update_node,
        ctx.db,
        path,
        changes,
        actor=actor,
        reason=body.reason,
        expected=expected,
    )
    return await _changed(ctx, path, record, changes)


async def _delete(ctx: Ctx, actor: str, path: tuple[str, ...], reason: str) -> dict[str, Any]:
    record = await in_thread(tenancy.delete_node, ctx.db, path, actor=actor, reason=reason)
    return {**(await _changed(ctx, path, record, {}, deleted=True)), "deleted": True}


async def _get(ctx: Ctx, path: tuple[str, ...]) -> dict[str, Any]:
    record = await in_thread(tenancy.get_node, ctx.db, path)
    return dict(as_json(record))


async def _list(ctx: Ctx, path: tuple[str, ...]) -> dict[str, Any]:
    return {"data": as_json(await in_thread(tenancy.list_children, ctx.db, path))}


@router.get("/hierarchy")
async def get_hierarchy(ctx: Ctx, _: Admin) -> dict[str, Any]:
    """Every tenant with its applications and their agents (weights, tiers, SLO defaults)."""
    return {"data": as_json(await in_thread(tenancy.hierarchy, ctx.db))}


# -- tenants -------------------------------------------------------------------------------
@router.get("/tenants")
async def list_tenants(ctx: Ctx, _: Admin) -> dict[str, Any]:
    return await _list(ctx, ())


@router.post("/tenants", status_code=201)
async def create_tenant(ctx: Ctx, actor: Admin, body: TenantCreate) -> dict[str, Any]:
    return await _create(ctx, actor, (body.name,), body)


@router.get("/tenants/{tenant}")
async def get_tenant(ctx: Ctx, _: Admin, tenant: str) -> dict[str, Any]:
    return await _get(ctx, (tenant,))


@router.patch("/tenants/{tenant}")
async def update_tenant(ctx: Ctx, actor: Admin, tenant: str, body: TenantFields) -> dict[str, Any]:
    return await _update(ctx, actor, (tenant,), body)


@router.delete("/tenants/{tenant}")
async def delete_tenant(ctx: Ctx, actor: Admin, tenant: str, reason: Reason) -> dict[str, Any]:
    """Deletes the tenant with its applications, agents and keys (history is kept)."""
    return await _delete(ctx, actor, (tenant,), reason)


# -- applications --------------------------------------------------------------------------
@router.get("/tenants/{tenant}/apps")
async def list_apps(ctx: Ctx, _: Admin, tenant: str) -> dict[str, Any]:
    return await _list(ctx, (tenant,))


@router.post("/tenants/{tenant}/apps", status_code=201)
async def create_app(ctx: Ctx, actor: Admin, tenant: str, body: AppCreate) -> dict[str, Any]:
    return await _create(ctx, actor, (tenant, body.name), body)


@router.get("/tenants/{tenant}/apps/{app}")
async def get_app(ctx: Ctx, _: Admin, tenant: str, app: str) -> dict[str, Any]:
    return await _get(ctx, (tenant, app))


@router.patch("/tenants/{tenant}/apps/{app}")
async def update_app(
    ctx: Ctx, actor: Admin, tenant: str, app: str, body: NodeFields
) -> dict[str, Any]:
    return await _update(ctx, actor, (tenant, app), body)


@router.delete("/tenants/{tenant}/apps/{app}")
async def delete_app(
    ctx: Ctx, actor: Admin, tenant: str, app: str, reason: Reason
) -> dict[str, Any]:
    return await _delete(ctx, actor, (tenant, app), reason)


# -- agents --------------------------------------------------------------------------------
@router.get("/tenants/{tenant}/apps/{app}/agents")
async def list_agents(ctx: Ctx, _: Admin, tenant: str, app: str) -> dict[str, Any]:
    return await _list(ctx, (tenant, app))


@router.post("/tenants/{tenant}/apps/{app}/agents", status_code=201)
async def create_agent(
    ctx: Ctx, actor: Admin, tenant: str, app: str, body: AgentCreate
) -> dict[str, Any]:
    return await _create(ctx, actor, (tenant, app, body.name), body)


@router.get("/tenants/{tenant}/apps/{app}/agents/{agent}")
async def get_agent(ctx: Ctx, _: Admin, tenant: str, app: str, agent: str) -> dict[str, Any]:
    return await _get(ctx, (tenant, app, agent))


@router.patch("/tenants/{tenant}/apps/{app}/agents/{agent}")
async def update_agent(
    ctx: Ctx, actor: Admin, tenant: str, app: str, agent: str, body: AgentFields
) -> dict[str, Any]:
    return await _update(ctx, actor, (tenant, app, agent), body)


@router.delete("/tenants/{tenant}/apps/{app}/agents/{agent}")
async def delete_agent(
    ctx: Ctx, actor: Admin, tenant: str, app: str, agent: str, reason: Reason
) -> dict[str, Any]:
    return await _delete(ctx, actor, (tenant, app, agent), reason)


# -- weights -------------------------------------------------------------------------------
NODE_CHANGED = conflict(
    "The node changed since it was read (`node_changed`: its weight is no longer `expected`): "
    "read it again and retry"
)


@router.put("/weights/{node:path}", responses=NODE_CHANGED)
async def set_weight(ctx: Ctx, actor: Admin, node: str, body: WeightChange) -> dict[str, Any]:
    """Set the weight of `tenant`, `tenant/app` or `tenant/app/agent` (SQL and scheduler).
    With `expected` (the weight as read), only over that weight (409 `node_changed`)."""
    path = tuple(node.split("/"))
    if not 1 <= len(path) <= 3 or not all(path):
        raise ApiError(422, "A node is 'tenant', 'tenant/app' or 'tenant/app/agent'.", param="node")
    expected = None if body.expected is None else {"weight": body.expected}
    return await _update(ctx, actor, path, body, expected)
