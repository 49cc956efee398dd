"""`/admin/state` (the leader's live checkpoint) and `/admin/nodes` (per-node live views)."""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query

from control_plane.api.admin.deps import Ctx, in_thread
from control_plane.api.admin.node_views import (
    HourStats,
    LiveInputs,
    counts_from_live,
    counts_from_records,
    fairness_params,
    level_jain,
    node_views,
)
from control_plane.api.auth import Admin
from control_plane.core.ledger import Ledger, Node
from control_plane.gateway.errors import ApiError
from control_plane.state import StateStores
from storage.db import Database

router = APIRouter(tags=["admin: live"])
HOUR_S = 3600.0


def no_leader() -> ApiError:
    return ApiError(
        503,
        "No scheduler leader has published live state yet.",
        code="no_live_state",
        headers={"Retry-After": "1"},
    )


@router.get("/state")
async def live_state(ctx: Ctx, _: Admin) -> dict[str, Any]:
    """The live view the scheduler leader checkpoints every second, with its age."""
    live = await ctx.stores.checkpoints.load("live")
    if live is None:
        raise no_leader()
    return {**live, "age_s": max(0.0, time.time() - float(live.get("updated_at") or 0.0))}


def _sql_inputs(db: Database, now: float) -> tuple[dict[Node, float], dict[Node, HourStats]]:
    weights: dict[Node, float] = {}
    hour: dict[Node, HourStats] = {}
    with db.reader() as r:
        for tn in r.tenants.hierarchy():
            weights[(tn.tenant.name,)] = tn.tenant.weight
            for an in tn.apps:
                weights[(tn.tenant.name, an.app.name)] = an.app.weight
                for agent in an.agents:
                    weights[(tn.tenant.name, an.app.name, agent.name)] = agent.weight
        for level in ("tenant", "app", "agent"):
            report = r.rollups.report(start=now - HOUR_S, end=now, level=level)
            for node in report.nodes:
                hour[node.path] = HourStats(node.violations, node.ok + node.failed)
    return weights, hour


async def _counts(stores: StateStores, live: dict[str, Any]) -> dict[Node, tuple[int, int]]:
    if isinstance(live.get("nodes"), list):
        return counts_from_live(live["nodes"])
    queued = await stores.requests.load_queued()
    inflight = await stores.requests.load_many(list(await stores.requests.inflight()))
    return counts_from_records([*queued, *inflight])


@router.get("/nodes")
async def live_nodes(
    ctx: Ctx,
    _: Admin,
    level: Annotated[Literal["tenant", "app", "agent"] | None, Query()] = None,
    tenant: Annotated[str | None, Query()] = None,
    app: Annotated[str | None, Query()] = None,
) -> dict[str, Any]:
    """Every node (or one level / one tenant's or application's subtree): counter, service,
    SAFI and its parts, credit, resource, queue, in-flight, SLO attainment (1 min, 1 h)."""
    now = time.time()
    live = await ctx.stores.checkpoints.load("live") or {}
    saved = await ctx.stores.checkpoints.load("ledger") or {}
    ledger = Ledger.from_snapshot(saved["ledger"]) if "ledger" in saved else Ledger()
    knobs = await ctx.stores.knobs.get_all()
    params = (live.get("policy") or knobs.get("policy") or {}).get("params") or {}
    alpha, beta = fairness_params(params, knobs.get("fairness"))
    weights, hour = await in_thread(_sql_inputs, ctx.db, now)
    for key, value in (knobs.get("weights") or {}).items():
        weights[tuple(str(key).split("/"))] = float(value)
    inputs = LiveInputs(ledger, await _counts(ctx.stores, live), weights, hour, now, alpha)
    rows = node_views(inputs)
    selected = [
        r
        for r in rows
        if (level is None or r["level"] == level)
        and (tenant is None or r["path"][0] == tenant)
        and (app is None or (len(r["path"]) > 1 and r["path"][1] == app))
    ]
    updated = live.get("updated_at")
    return {
        "leader": live.get("leader"),
        "updated_at": updated,
        "age_s": None if updated is None else max(0.0, now - float(updated)),
        "policy": (live.get("policy") or {}).get("name"),
        "alpha": alpha,
        "beta": beta,
        "window_s": ledger.window_s,
        "jain": level_jain(rows),
        "nodes": selected,
    }
