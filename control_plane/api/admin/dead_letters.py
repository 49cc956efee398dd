"""`/admin/dead-letters`: stream entries a consumer could not parse, convert or write."""

from __future__ import annotations

import re
from typing import Annotated, Any

from fastapi import APIRouter, Query

from control_plane.admin.records import as_json
from control_plane.api.admin.deps import Ctx
from control_plane.api.auth import Admin
from control_plane.gateway.errors import ApiError

router = APIRouter(tags=["admin: dead letters"])
_STREAM_ID = re.compile(r"^\d{1,20}-\d{1,20}$")


@router.get("/dead-letters")
async def dead_letters(
    ctx: Ctx,
    _: Admin,
    limit: Annotated[int, Query(ge=1, le=500, description="page size")] = 100,
    before: Annotated[
        str | None, Query(description="`next_before` of the previous page: older entries")
    ] = None,
) -> dict[str, Any]:
    """Dead letters, newest first, one bounded page at a time, with how many there ever were
    per `consumer:kind` (the stream itself keeps only the newest ones)."""
    if before is not None and not _STREAM_ID.match(before):
        raise ApiError(
            422, "'before' must be a dead-letter id such as 1700000000000-0", param="before"
        )
    letters = await ctx.stores.dead_letters.list(limit=limit, before=before)
    return {
        "data": as_json(letters),
        "next_before": letters[-1].id if len(letters) == limit else None,
        "counts": await ctx.stores.dead_letters.counts(),
    }
