"""`/admin/workflows`: applications seen in the request history and, per application, its
agent graph with edge frequencies and per-agent latency distributions (see
`workflow_graph.py`). Computed from the most recent request rows of the period.
`/admin/learned/workflows`: what the scheduler leader learned online and schedules by."""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, Query

from control_plane.api.admin.deps import Ctx, in_thread
from control_plane.api.admin.live import no_leader
from control_plane.api.admin.workflow_graph import app_graph, apps_summary
from control_plane.api.auth import Admin
from control_plane.gateway.bounds import Epoch
from storage.db import Database
from storage.records import RequestRecord

router = APIRouter(tags=["admin: workflows"])
DEFAULT_SPAN_S = 86400.0
MAX_ROWS = 50_000


def _rows(
    db: Database, tenant: str | None, app: str | None, since: float, until: float, limit: int
) -> list[RequestRecord]:
    with db.reader() as r:
        return r.requests.list(
            tenant=tenant, app=app, since=since, until=until, ran_only=True, limit=limit
        )


Since = Annotated[Epoch | None, Query(description="epoch s; default 24 h before 'until'")]
Until = Annotated[Epoch | None, Query(description="epoch s; default now")]
Limit = Annotated[int, Query(ge=1, le=MAX_ROWS, description="most recent rows read")]


def _period(since: float | None, until: float | None) -> tuple[float, float]:
    end = until if until is not None else time.time()
    return (since if since is not None else end - DEFAULT_SPAN_S), end


@router.get("/learned/workflows")
async def learned_workflows(
    ctx: Ctx,
    _: Admin,
    tenant: Annotated[str | None, Query(max_length=128)] = None,
    app: Annotated[str | None, Query(max_length=128)] = None,
) -> dict[str, Any]:
    """What the scheduler leader's workflow orchestrator learned and uses, per application:
    the agent graph (calls; per edge its count, frequency over the source agent's calls and
    parallel calls), each agent's remaining-latency convergence, single-call mode, remaining
    stages, live priority (1 = first) and both latency windows as quantiles in seconds
    (`latency_s`), from the live checkpoint (updated every second). `policy` is the policy
    the leader runs: only kairos orders by `priority`, ayo by `stages`."""
    live = await ctx.stores.checkpoints.load_live()
    if live is None:
        raise no_leader()
    apps = live.workflows if isinstance(live.workflows, list) else []
    data = [
        a
        for a in apps
        if isinstance(a, dict)
        and (tenant is None or a.get("tenant") == tenant)
        and (app is None or a.get("app") == app)
    ]
    return {"updated_at": live.updated_at, "policy": live.policy.name, "data": data}


@router.get("/workflows")
async def list_workflows(
    ctx: Ctx, _: Admin, since: Since = None, until: Until = None, limit: Limit = MAX_ROWS
) -> dict[str, Any]:
    """Applications with calls in the period: calls, workflows, agents."""
    start, end = _period(since, until)
    rows = await in_thread(_rows, ctx.db, None, None, start, end, limit)
    return {"since": start, "until": end, "rows": len(rows), "data": apps_summary(rows)}


@router.get("/workflows/{app}")
async def app_workflows(
    ctx: Ctx,
    _: Admin,
    app: str,
    tenant: Annotated[
        str | None, Query(description="the app's tenant (names are per tenant)")
    ] = None,
    since: Since = None,
    until: Until = None,
    limit: Limit = MAX_ROWS,
) -> dict[str, Any]:
    """The agent graph (nodes, edges with counts, frequencies and parallel calls) and each
    agent's single-call and remaining-latency distributions."""
    start, end = _period(since, until)
    rows = await in_thread(_rows, ctx.db, tenant, app, start, end, limit)
    graph = await in_thread(app_graph, rows)
    return {"tenant": tenant, "app": app, "since": start, "until": end, **graph}
