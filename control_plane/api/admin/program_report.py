"""The program-level report as JSON: per application from the request history (SQL), per
worker preemptions from the scheduler leader's live view.

Preemptions are not in SQL: a worker reports its engine's cumulative counter
(`vllm:num_preemptions_total`) on each scrape, and only the leader's live checkpoint and the
scrape samples in Redis hold it. So the figure is "since the worker's engine started", as of
the live view's `updated_at`, whatever the report's period; with no leader it is empty.
"""

from __future__ import annotations

import time
from typing import Any

from control_plane.admin.reports import iso
from control_plane.contracts.checkpoints import LiveView
from storage.db import Database
from storage.repos import program_report_from_requests


def program_report(db: Database, start: float, end: float, tenant: str | None) -> dict[str, Any]:
    """Per application over the workflows started in [start, end): the period (epoch and ISO)
    and `data`, one entry per application (see `storage.program_reports.AppPrograms`)."""
    with db.reader() as r:
        report = program_report_from_requests(r.session, since=start, until=end, tenant=tenant)
    return {
        "start": start,
        "end": end,
        "from": iso(start),
        "to": iso(end),
        "tenant": tenant,
        "data": report.to_json()["data"],
        "generated_at": time.time(),
    }


def live_preemptions(live: LiveView | None) -> dict[str, Any]:
    """Per worker (by id): model, health and cumulative preemptions, as the leader last saw
    them; `updated_at` and `leader` None (and no workers) when no leader publishes."""
    if live is None:
        return {"source": "live", "updated_at": None, "leader": None, "data": []}
    workers = sorted(live.workers, key=lambda w: w.id)
    return {
        "source": "live",
        "updated_at": live.updated_at,
        "leader": live.leader,
        "data": [
            {"worker": w.id, "model": w.model, "healthy": w.healthy, "preemptions": w.preemptions}
            for w in workers
        ],
    }
