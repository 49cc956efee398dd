"""Worker registration and drain as audited operations on SQL plus the Redis registry.

Redis is what the scheduler reads (it dispatches only to `active` workers); SQL is the durable
record and the audit log. Registration probes the worker's `/v1/models` (best effort) when no
model is given, and a re-registered worker keeps its drain state.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import httpx

from control_plane.admin.records import as_json
from control_plane.api.admin.schemas import WorkerIn
from control_plane.contracts.workers import ADMIN, WorkerEntry
from storage.db import Database, Repos
from storage.errors import AlreadyExistsError, NotFoundError
from storage.records import WorkerRecord, WorkerStatus


def default_worker_id(url: str) -> str:
    """`host:port` of the worker's URL (unique per address)."""
    return urlsplit(url).netloc


async def probe_model(url: str, timeout_s: float = 2.0) -> str:
    """The first model the worker serves, or '' when it does not answer (yet)."""
    try:
        async with httpx.AsyncClient(timeout=timeout_s) as client:
            resp = await client.get(f"{url.rstrip('/')}/v1/models")
            data = resp.json().get("data") or []
            return str(data[0]["id"]) if resp.status_code == 200 and data else ""
    except (httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError):
        return ""


def redis_record(body: WorkerIn, worker_id: str, model: str) -> WorkerEntry:
    """The Redis registry entry (no `status`: a new one starts active, a known one keeps its
    state)."""
    return WorkerEntry(
        id=worker_id,
        url=body.url.rstrip("/"),
        model=model,
        kind=body.kind,
        max_num_seqs=body.max_num_seqs,
        kv_tokens=body.kv_tokens,
        profile=body.profile,
        origin=ADMIN,  # the operator's from now on: never drained by a scheduler's settings
    )


def check_url_free(db: Database, worker_id: str, url: str) -> None:
    """AlreadyExistsError when another worker is registered at `url`."""
    with db.reader() as r:
        for worker in r.workers.list():
            if worker.url == url and worker.id != worker_id:
                raise AlreadyExistsError(f"worker {worker.id!r} is already registered at {url}")


def register_rows(r: Repos, record: WorkerEntry, *, actor: str, reason: str) -> WorkerRecord:
    """Add or update the SQL worker row; audited as `worker.register`."""
    old = r.workers.get(worker_id=record.id)
    saved = r.workers.register(
        worker_id=record.id,
        url=record.url or "",
        kind="sim" if record.kind == "sim" else "vllm",
        model=record.model or "",
        profile=record.profile,
        max_num_seqs=record.max_num_seqs,
    )
    r.audit.append(
        actor=actor,
        action="worker.register",
        target=f"worker:{saved.id}",
        old=None if old is None else as_json(old),
        new=as_json(saved),
        reason=reason,
    )
    return saved


def set_status_rows(
    r: Repos, worker_id: str, status: WorkerStatus, *, actor: str, reason: str, action: str
) -> WorkerRecord | None:
    """Set the SQL status (None when SQL does not know the worker); audited as `action`."""
    old = r.workers.get(worker_id=worker_id)
    saved = None if old is None else r.workers.set_status(worker_id=worker_id, status=status)
    r.audit.append(
        actor=actor,
        action=action,
        target=f"worker:{worker_id}",
        old={"status": None if old is None else old.status},
        new={"status": status},
        reason=reason,
    )
    return saved


def remove_rows(r: Repos, worker_id: str, *, actor: str, reason: str, known: bool) -> None:
    """Forget the worker in SQL; NotFoundError when neither SQL nor Redis (`known`) had it."""
    old = r.workers.get(worker_id=worker_id)
    if old is None and not known:
        raise NotFoundError(f"worker {worker_id!r} is not registered")
    r.workers.remove(worker_id=worker_id)
    r.audit.append(
        actor=actor,
        action="worker.delete",
        target=f"worker:{worker_id}",
        old=None if old is None else as_json(old),
        new=None,
        reason=reason,
    )


def sql_workers(db: Database) -> list[WorkerRecord]:
    with db.reader() as r:
        return r.workers.list()


def sql_worker(db: Database, worker_id: str) -> WorkerRecord | None:
    with db.reader() as r:
        return r.workers.get(worker_id=worker_id)
