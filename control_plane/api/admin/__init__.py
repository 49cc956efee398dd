"""The admin API (`/admin`, Bearer admin token): tenants, apps, agents and keys; models;
workers; live state and per-node views; policy and knobs; workflows; reports; the audit log.

Every change is audited in SQL with its actor, old and new values and a required reason.
"""

from fastapi import APIRouter, Depends

from control_plane.api.admin import (
    audit,
    dead_letters,
    keys,
    knobs,
    live,
    live_history,
    models,
    operators,
    policy,
    reports,
    tenants,
    workers,
    workflows,
)
from control_plane.api.auth import require_admin

# Every route also declares `Admin` (for the actor); this guard covers any route added later.
router = APIRouter(prefix="/admin", dependencies=[Depends(require_admin)])
for _module in (tenants, keys, models, workers, live, policy, knobs, workflows, reports, audit):
    router.include_router(_module.router)
router.include_router(dead_letters.router)
router.include_router(operators.router)
router.include_router(live_history.router)

__all__ = ["router"]
