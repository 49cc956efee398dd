"""`/admin/models`: the model registry (kind and shape, which price tokens in Unified Tokens)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from control_plane.admin.records import as_json
from control_plane.api.admin.deps import Ctx, Reason, in_thread
from control_plane.api.admin.schemas import ModelSpecIn
from control_plane.api.auth import Admin
from control_plane.gateway.bounds import Name
from storage.db import Database
from storage.errors import NotFoundError
from storage.records import ModelRecord

router = APIRouter(tags=["admin: models"])


def _upsert(db: Database, name: str, spec: ModelSpecIn, actor: str) -> ModelRecord:
    values = spec.model_dump(exclude={"reason"})
    with db.repos() as r:
        old = r.models.get(name=name)
        record = r.models.upsert(name=name, **values)
        r.audit.append(
            actor=actor,
            action="model.upsert",
            target=f"model:{name}",
            old=None if old is None else as_json(old),
            new=as_json(record),
            reason=spec.reason,
        )
        return record


def _delete(db: Database, name: str, actor: str, reason: str) -> ModelRecord:
    with db.repos() as r:
        old = r.models.get(name=name)
        if old is None:
            raise NotFoundError(f"model {name!r} is not registered")
        r.models.delete(name=name)
        r.audit.append(
            actor=actor,
            action="model.delete",
            target=f"model:{name}",
            old=as_json(old),
            new=None,
            reason=reason,
        )
        return old


def _list(db: Database) -> list[ModelRecord]:
    with db.reader() as r:
        return r.models.list()


@router.get("/models")
async def list_models(ctx: Ctx, _: Admin) -> dict[str, Any]:
    return {"data": as_json(await in_thread(_list, ctx.db))}


@router.put("/models/{name}")
async def put_model(ctx: Ctx, actor: Admin, name: Name, body: ModelSpecIn) -> dict[str, Any]:
    """Create or replace a model's description."""
    return dict(as_json(await in_thread(_upsert, ctx.db, name, body, actor)))


@router.delete("/models/{name}")
async def delete_model(ctx: Ctx, actor: Admin, name: str, reason: Reason) -> dict[str, Any]:
    record = await in_thread(_delete, ctx.db, name, actor, reason)
    return {**as_json(record), "deleted": True}
