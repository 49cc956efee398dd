"""`/admin/audit`: the audit log, newest first, filtered by target, action and time."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from control_plane.admin.records import as_json
from control_plane.api.admin.deps import Ctx, in_thread
from control_plane.api.auth import Admin
from control_plane.gateway.bounds import Epoch
from storage.db import Database
from storage.records import AuditRecord

router = APIRouter(tags=["admin: audit"])


def _list(
    db: Database, target: str | None, action: str | None, since: float | None, limit: int
) -> list[AuditRecord]:
    with db.reader() as r:
        return r.audit.list(target=target, action=action, since=since, limit=limit)


@router.get("/audit")
async def audit_log(
    ctx: Ctx,
    _: Admin,
    target: Annotated[str | None, Query(description="e.g. 'tenant:acme', 'policy'")] = None,
    action: Annotated[str | None, Query(description="e.g. 'policy.switch'")] = None,
    since: Annotated[Epoch | None, Query(description="epoch seconds")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> dict[str, Any]:
    """Who changed what, when, from which value to which, and why."""
    return {"data": as_json(await in_thread(_list, ctx.db, target, action, since, limit))}
