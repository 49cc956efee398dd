"""`/admin/reports`: historical fairness per node as JSON, CSV or HTML (same numbers as
`arbiter admin report`); `/admin/reports/service-by-kind`: service per tenant per model kind;
`/admin/reports/programs`: program-level (workflow) latencies per application and
preemptions per worker."""

from __future__ import annotations

import time
from typing import Annotated, Any, TypeVar, cast

from fastapi import APIRouter, Query
from fastapi.responses import HTMLResponse, JSONResponse, Response

from control_plane.admin.kind_report import service_by_kind
from control_plane.admin.report_render import to_csv, to_html
from control_plane.admin.reports import (
    ReportQuery,
    Source,
    fairness_report,
    parse_time,
)
from control_plane.api.admin.deps import Ctx, in_thread
from control_plane.api.admin.program_report import live_preemptions, program_report
from control_plane.api.auth import Admin
from control_plane.gateway.errors import ApiError
from storage.records import Level

router = APIRouter(tags=["admin: reports"])
DAY_S = 86400.0
T = TypeVar("T")
LEVELS = ("tenant", "app", "agent")
FORMATS = ("json", "csv", "html")
SOURCES = ("rollups", "requests")
STEPS = (60, 3600, 86400)


def _choice(value: T, allowed: tuple[T, ...], param: str) -> T:
    if value not in allowed:
        choices = ", ".join(str(a) for a in allowed)
        raise ApiError(
            422, f"'{param}' must be one of {choices}", param=param, code="invalid_value"
        )
    return value


def _time(text: str | None, default: float, param: str) -> float:
    if text is None:
        return default
    try:
        return parse_time(text)
    except ValueError:
        raise ApiError(
            422,
            f"'{param}' must be epoch seconds or an ISO 8601 date/time, got {text!r}",
            param=param,
            code="invalid_value",
        ) from None


def _period(from_: str | None, to: str | None) -> tuple[float, float]:
    """[from, to) in epoch seconds: `to` defaults to now, `from` to 24 h before `to`; 422
    naming the parameter when one cannot be read or the period is empty."""
    end = _time(to, time.time(), "to")
    start = _time(from_, end - DAY_S, "from")
    if not start < end:
        raise ApiError(422, "'from' must be before 'to'", param="from", code="invalid_value")
    return start, end


From = Annotated[
    str | None, Query(alias="from", description="epoch s or ISO 8601; default 24 h before 'to'")
]
To = Annotated[str | None, Query(description="epoch s or ISO 8601; default now")]


@router.get("/reports", response_model=None)
async def report(
    ctx: Ctx,
    _: Admin,
    from_: From = None,
    to: To = None,
    level: Annotated[str, Query(description="tenant | app | agent")] = "tenant",
    format: Annotated[str, Query(description="json | csv | html")] = "json",
    tenant: str | None = None,
    step: Annotated[int | None, Query(description="60 | 3600 | 86400 s")] = None,
    source: Annotated[str, Query(description="rollups | requests")] = "rollups",
) -> Response:
    """Per node: requests, tokens, unified service, share against weight, SLO-violation rate,
    TTFT/TPOT/e2e p50/p95/p99, SAFI; Jain's index for the period and per series window."""
    start, end = _period(from_, to)
    query = ReportQuery(
        start,
        end,
        cast(Level, _choice(level, LEVELS, "level")),
        tenant=tenant,
        step=None if step is None else int(_choice(step, STEPS, "step")),
        source=cast(Source, _choice(source, SOURCES, "source")),
    )
    _choice(format, FORMATS, "format")
    data: dict[str, Any] = await in_thread(fairness_report, ctx.db, query)
    name = f"arbiter-report-{level}-{data['from'][:10]}-{data['to'][:10]}"
    if format == "csv":
        return Response(
            to_csv(data),
            media_type="text/csv; charset=utf-8",
            headers={"Content-Disposition": f'attachment; filename="{name}.csv"'},
        )
    if format == "html":
        return HTMLResponse(await in_thread(to_html, data))
    return JSONResponse(data)


@router.get("/reports/service-by-kind")
async def service_per_kind(ctx: Ctx, _: Admin, from_: From = None, to: To = None) -> dict[str, Any]:
    """Per tenant per model kind (llm, vlm, image, video, audio), for arrivals in [from, to):
    requests, tokens and unified service, and the tenant's `share` of the kind's unified
    service (a kind's shares sum to 1). A model missing from the registry counts as llm."""
    start, end = _period(from_, to)
    return await in_thread(service_by_kind, ctx.db, start, end)


@router.get("/reports/programs")
async def programs(
    ctx: Ctx,
    _: Admin,
    from_: From = None,
    to: To = None,
    tenant: Annotated[str | None, Query(max_length=128, description="only this tenant")] = None,
) -> dict[str, Any]:
    """Per application, over the workflows whose first call arrived in [from, to): workflows,
    completed (every call ended ok), calls per workflow, and mean/P90/P95/P99 of end-to-end
    latency (s) and program-level token latency (s per output token) — the simulator's
    definitions (`storage/program_reports.py`). `preemptions`: per worker, its engine's
    cumulative preemption count from the scheduler leader's live view (not per period)."""
    start, end = _period(from_, to)
    data = await in_thread(program_report, ctx.db, start, end, tenant)
    live = await ctx.stores.checkpoints.load_live()
    return {**data, "preemptions": live_preemptions(live)}
