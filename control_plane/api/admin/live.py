"""`/admin/state` (the leader's live checkpoint) and `/admin/nodes` (per-node live views)."""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query

from control_plane.api.admin.deps import Ctx, in_thread
from control_plane.api.admin.node_views import (
    HourStats,
    LiveInputs,
    counts_from_records,
    fairness_params,
    level_jain,
    node_views,
    totals,
)
from control_plane.api.auth import Admin
from control_plane.contracts.checkpoints import LiveView
from control_plane.contracts.knobs import Fairness, NodeWeights, PluginChoice, knob_of
from control_plane.core.entitlement import STATUS_RULE
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
    live = await ctx.stores.checkpoints.load_live()
    if live is None:
        raise no_leader()
    return {**live.to_json(), "age_s": max(0.0, time.time() - live.updated_at)}


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


async def _counts(stores: StateStores, live: LiveView | None) -> dict[Node, tuple[int, int]]:
    if live is not None:
        return {n.path: (n.queued, n.inflight) for n in live.nodes}
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
    SAFI and its parts, credit, resource, queue, in-flight, SLO attainment (1 min, 1 h), and
    from the leader's live view demand, received, entitled, waits and starved / over-served
    status. `totals` (the console's header) sums the tenant rows of this same snapshot."""
    now = time.time()
    live = await ctx.stores.checkpoints.load_live()
    saved = await ctx.stores.checkpoints.load_leader()
    snapshot = saved.ledger if saved is not None else None
    ledger = Ledger() if snapshot is None else Ledger.from_snapshot(dict(snapshot))
    knobs = await ctx.stores.knobs.get_all()
    knob_policy = knob_of(knobs, "policy", PluginChoice)
    if live is not None and live.policy.name:
        params = live.policy.params
    else:
        params = knob_policy.params if knob_policy else {}
    alpha, beta = fairness_params(params, knob_of(knobs, "fairness", Fairness))
    weights, hour = await in_thread(_sql_inputs, ctx.db, now)
    knob_weights = knob_of(knobs, "weights", NodeWeights)
    weights.update(knob_weights.table if knob_weights else {})
    loads = {n.path: n for n in live.nodes} if live is not None else {}
    counts = await _counts(ctx.stores, live)
    inputs = LiveInputs(ledger, counts, weights, hour, now, alpha, loads)
    rows = node_views(inputs)
    selected = [
        r
        for r in rows
        if (level is None or r["level"] == level)
        and (tenant is None or r["path"][0] == tenant)
        and (app is None or (len(r["path"]) > 1 and r["path"][1] == app))
    ]
    return {
        "leader": live.leader if live else None,
        "updated_at": live.updated_at if live else None,
        "age_s": max(0.0, now - live.updated_at) if live else None,
        "policy": live.policy.name if live else None,
        "alpha": alpha,
        "beta": beta,
        "window_s": ledger.window_s,
        "jain": level_jain(rows),
        "totals": {
            **totals(rows),
            "waiting_in_engines": sum(w.waiting for w in live.workers) if live else 0,
            "slots": sum(w.max_num_seqs for w in live.workers if w.healthy) if live else 0,
        },
        "status_rule": STATUS_RULE,
        "tolerance": live.tolerance if live else None,
        "wait_threshold_s": live.wait_threshold_s if live else None,
        "nodes": selected,
    }
