"""`/admin/live/history`: the Live page's time series, kept server side.

Ranges up to the Redis history's retention (one hour) come from the leader's rolling history
(`state.LiveHistory`: every field of `HISTORY_FIELDS`, one sample per step); longer ranges, up
to a day, from the SQL minute rollups (`ROLLUP_FIELDS` only: what the recorder keeps per
minute, by the minute the requests arrived). Either way at most `MAX_POINTS` times per node.
Minute rollups are pruned no younger than two days (`storage/retention.py`), so a day back
never reaches the minute horizon (`minute_series` would refuse it: 422).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Annotated, Any, Final, Literal

from fastapi import APIRouter, Query

from control_plane.api.admin.deps import Ctx, in_thread
from control_plane.api.auth import Admin
from control_plane.state import HistorySample
from control_plane.state.live_history import FIELDS, RETENTION_S
from storage.db import Database
from storage.repos.rollups import MinuteRow

router = APIRouter(tags=["admin: live"])
MAX_POINTS: Final = 300
MIN_RANGE_S: Final = 60
MAX_RANGE_S: Final = 86_400
LEVEL_DEPTH: Final = {"tenant": 1, "app": 2, "agent": 3}
HISTORY_FIELDS: Final = tuple(f for f in FIELDS if f != "key")
ROLLUP_FIELDS: Final = ("service", "service_rate", "tokens_rate", "requests", "slo_attainment")
Level = Literal["tenant", "app", "agent"]


def _wanted(key: str, level: Level, tenant: str | None, app: str | None) -> bool:
    path = key.split("/")
    return (
        len(path) == LEVEL_DEPTH[level]
        and (tenant is None or path[0] == tenant)
        and (app is None or (len(path) > 1 and path[1] == app))
    )


def thin(samples: Sequence[HistorySample], most: int = MAX_POINTS) -> list[HistorySample]:
    """Every k-th sample, the newest kept, so at most `most` remain (k = the smallest that
    fits); the values are cumulative or already windowed, so picking loses no meaning."""
    stride = max(1, math.ceil(len(samples) / most))
    return list(samples[::-1][::stride][::-1])


def history_points(
    samples: Sequence[HistorySample], level: Level, tenant: str | None, app: str | None
) -> list[dict[str, Any]]:
    """One record (t, key, every history field) per kept sample and selected node."""
    return [
        {"t": s.t, **{f: getattr(p, f) for f in FIELDS}}
        for s in thin(samples)
        for p in s.points
        if _wanted(p.key, level, tenant, app)
    ]


def rollup_points(rows: Sequence[MinuteRow], start: int, end: int) -> tuple[list[Any], int]:
    """Minute rows merged into buckets of whole minutes (at most `MAX_POINTS` per node), with
    every node present in every bucket; `service` accumulates from the range's start."""
    minutes = max(1, (end - start) // 60)
    step = 60 * math.ceil(minutes / MAX_POINTS)
    sums: dict[tuple[int, str], list[float]] = {}
    for row in rows:
        bucket = start + (row.minute - start) // step * step
        acc = sums.setdefault((bucket, "/".join(row.path)), [0.0, 0, 0, 0, 0])
        for i, value in enumerate(row[2:]):
            acc[i] += value
    keys = sorted({key for _, key in sums})
    running = dict.fromkeys(keys, 0.0)
    points = []
    for bucket in range(start, end, step):
        for key in keys:
            service, requests, tokens, violations, finished = sums.get((bucket, key), [0.0] * 5)
            running[key] += service
            points.append(
                {
                    "t": float(bucket),
                    "key": key,
                    "service": running[key],
                    "service_rate": service / step,
                    "tokens_rate": tokens / step,
                    "requests": int(requests),
                    "slo_attainment": 1.0 - violations / finished if finished else None,
                }
            )
    return points, step


def _rollups(
    db: Database, now: float, range_s: int, level: Level, tenant: str | None, app: str | None
) -> tuple[list[Any], int]:
    end = math.ceil(now / 60) * 60
    start = end - math.ceil(range_s / 60) * 60
    with db.reader() as r:
        rows = r.rollups.minute_series(start=start, end=end, level=level, tenant=tenant, app=app)
    return rollup_points(rows, start, end)


@router.get("/live/history")
async def live_history(
    ctx: Ctx,
    _: Admin,
    range_s: Annotated[int, Query(ge=MIN_RANGE_S, le=MAX_RANGE_S)] = 900,
    level: Annotated[Level, Query()] = "tenant",
    tenant: Annotated[str | None, Query()] = None,
    app: Annotated[str | None, Query()] = None,
) -> dict[str, Any]:
    """Per node of `level` (optionally one tenant's or application's), over the last
    `range_s` seconds: up to an hour from the leader's rolling history in Redis (`source`
    `redis`: cumulative service and virtual counter, received and demanded UT/s, queue,
    in flight, p95 wait, SLO attainment of the last minute); longer from the SQL minute
    rollups (`source` `rollups`: service accumulated over the range, received UT/s, tokens/s,
    requests and SLO attainment per bucket). `step_s` is the spacing of the points."""
    now = time.time()
    if range_s <= RETENTION_S:
        samples = await ctx.stores.live_history.read(now - range_s)
        kept = thin(samples)
        step = (kept[-1].t - kept[0].t) / (len(kept) - 1) if len(kept) > 1 else 0.0
        points: list[Any] = history_points(samples, level, tenant, app)
        source, fields = "redis", HISTORY_FIELDS
    else:
        points, whole = await in_thread(_rollups, ctx.db, now, range_s, level, tenant, app)
        step, source, fields = float(whole), "rollups", ROLLUP_FIELDS
    return {
        "range_s": range_s,
        "level": level,
        "source": source,
        "step_s": step,
        "retention_s": RETENTION_S,
        "fields": list(fields),
        "points": points,
    }
