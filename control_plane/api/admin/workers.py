"""`/admin/workers`: register, list (SQL record + Redis registry + scraped metrics + the
scheduler's live view), drain, undrain, delete."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from fastapi import APIRouter

from control_plane.admin.records import as_json
from control_plane.api.admin import worker_ops as ops
from control_plane.api.admin.deps import (
    Ctx,
    FieldErrors,
    Reason,
    in_thread,
    not_found,
)
from control_plane.api.admin.recorded import recorded_then_live
from control_plane.api.admin.schemas import Change, WorkerIn
from control_plane.api.auth import Admin
from control_plane.contracts.workers import ADMIN, WorkerEntry, WorkerSample
from control_plane.gateway.bounds import is_name
from storage.records import WorkerRecord, WorkerStatus

router = APIRouter(tags=["admin: workers"])

_LIVE_FIELDS = ("healthy", "inflight", "running", "waiting", "kv_usage", "preemptions", "error")


def merge_workers(
    sql: Sequence[WorkerRecord],
    redis: Sequence[WorkerEntry],
    metrics: Mapping[str, tuple[WorkerSample, float]],
    live: Sequence[Mapping[str, Any]],
    now: float,
) -> list[dict[str, Any]]:
    """One row per worker known anywhere; the live view wins for load, then raw metrics."""
    rows: dict[str, dict[str, Any]] = {}
    for sql_record in sql:
        rows[sql_record.id] = {**as_json(sql_record), "in_sql": True, "in_redis": False}
    for record in redis:
        row = rows.setdefault(record.id, {"in_sql": False})
        row.update(record.to_json(), in_redis=True)
    for worker_id, (sample, stored_at) in metrics.items():
        row = rows.setdefault(worker_id, {"id": worker_id, "in_sql": False, "in_redis": False})
        row.update(
            healthy=sample.healthy,
            running=sample.running,
            waiting=sample.waiting,
            kv_usage=sample.kv_usage,
            preemptions=sample.preemptions_total,
            kv_tokens=sample.kv_tokens or row.get("kv_tokens"),
            error=sample.error,
            scraped_at=stored_at,
        )
    for view in live:
        known = rows.get(str(view.get("id")))
        if known is not None:
            known.update({k: view[k] for k in _LIVE_FIELDS if k in view})
    for row in rows.values():
        scraped = row.get("scraped_at")
        row["metrics_age_s"] = None if scraped is None else max(0.0, now - float(scraped))
        row["drained"] = row.get("status") == "draining" and not row.get("inflight")
    return [rows[k] for k in sorted(rows)]


async def _known_in_redis(ctx: Ctx, worker_id: str) -> dict[str, Any] | None:
    entry = await ctx.stores.workers.get(worker_id)
    return None if entry is None else entry.to_json()


@router.get("/workers")
async def list_workers(ctx: Ctx, _: Admin) -> dict[str, Any]:
    sql = await in_thread(ops.sql_workers, ctx.db)
    redis = await ctx.stores.workers.list()
    metrics = await ctx.stores.workers.metrics()
    live = await ctx.stores.checkpoints.load_live()
    views = [asdict(w) for w in live.workers] if live else []
    rows = merge_workers(sql, redis, metrics, views, time.time())
    stale_after = stale_after_s(ctx.settings.scrape_interval_s)
    return {"data": [{**row, "stale_after_s": stale_after} for row in rows]}


def stale_after_s(scrape_interval_s: float) -> float:
    """How old a worker's last scrape may be before its health and load read as stale: 10 s,
    or 4 scrape intervals where those are longer (a loaded leader misses a few scrapes with
    nothing wrong; one that stopped scraping leaves its last samples behind for good)."""
    return max(10.0, 4 * scrape_interval_s)


@router.post("/workers", status_code=201)
async def register_worker(ctx: Ctx, actor: Admin, body: WorkerIn) -> dict[str, Any]:
    """Register (or update) a worker; it receives requests once the scheduler scrapes it."""
    url = body.url.rstrip("/")
    worker_id = body.id or ops.default_worker_id(url)
    if not is_name(worker_id):
        msg = f"the URL's host:port {worker_id!r} is not a valid worker name; give an 'id'"
        raise FieldErrors([{"loc": ("id",), "msg": msg}])
    await in_thread(ops.check_url_free, ctx.db, worker_id, url)
    model = body.model if body.model is not None else await ops.probe_model(url)
    record = ops.redis_record(body, worker_id, model)
    saved, _ = await recorded_then_live(
        ctx.db,
        lambda r: ops.register_rows(r, record, actor=actor, reason=body.reason),
        lambda: ctx.stores.workers.upsert(record, bounded=True),
    )
    return {**(await _known_in_redis(ctx, worker_id) or {}), "registered_at": saved.registered_at}


async def _set_status(
    ctx: Ctx, actor: str, worker_id: str, status: str, reason: str
) -> dict[str, Any]:
    redis = await _known_in_redis(ctx, worker_id)
    sql = await in_thread(ops.sql_worker, ctx.db, worker_id)
    if redis is None and sql is None:
        raise not_found(f"worker {worker_id!r}")
    if redis is None and sql is not None:  # Redis lost it (flushed): restore from SQL
        await ctx.stores.workers.upsert(
            WorkerEntry(
                sql.id,
                sql.url,
                model=sql.model,
                kind=sql.kind,
                max_num_seqs=sql.max_num_seqs or None,
                origin=ADMIN,  # only the admin API writes SQL worker rows
            )
        )
    action = "worker.drain" if status == "draining" else "worker.undrain"
    sql_status: WorkerStatus = "draining" if status == "draining" else "active"
    await recorded_then_live(
        ctx.db,
        lambda r: ops.set_status_rows(
            r, worker_id, sql_status, actor=actor, reason=reason, action=action
        ),
        lambda: ctx.stores.workers.set_status(worker_id, status, bounded=True),
    )
    return await _known_in_redis(ctx, worker_id) or {}


@router.post("/workers/{worker_id}/drain")
async def drain_worker(ctx: Ctx, actor: Admin, worker_id: str, body: Change) -> dict[str, Any]:
    """No new requests go to the worker; those in flight finish."""
    return await _set_status(ctx, actor, worker_id, "draining", body.reason)


@router.post("/workers/{worker_id}/undrain")
async def undrain_worker(ctx: Ctx, actor: Admin, worker_id: str, body: Change) -> dict[str, Any]:
    return await _set_status(ctx, actor, worker_id, "active", body.reason)


@router.delete("/workers/{worker_id}")
async def delete_worker(ctx: Ctx, actor: Admin, worker_id: str, reason: Reason) -> dict[str, Any]:
    """Forget the worker everywhere (drain it first to let in-flight requests finish)."""
    known = await ctx.stores.workers.get(worker_id) is not None
    await recorded_then_live(
        ctx.db,
        lambda r: ops.remove_rows(r, worker_id, actor=actor, reason=reason, known=known),
        lambda: ctx.stores.workers.remove(worker_id, bounded=True),
    )
    return {"id": worker_id, "deleted": True}
