"""Service per model kind (HMFS's multi-modal view): how much each tenant received, in Unified
Tokens, on each model kind (llm, vlm, image, video, audio) over [start, end).

Read straight from the request rows (`RequestRepo.service_by_kind`): every row counts whatever
its status, as in the fairness report; a model missing from the registry counts as "llm". Each
row carries the tenant's `share` of that kind's unified service, so a kind's shares sum to 1.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from control_plane.admin.reports import iso
from storage.db import Database
from storage.records import MODEL_KINDS
from storage.reports import KindService

_SUMS = ("requests", "images", "n_in", "n_out", "unified_service")


def _kind_totals(rows: Sequence[KindService]) -> list[dict[str, Any]]:
    """One entry per kind present (in `MODEL_KINDS` order): the sums over every tenant."""
    kinds = [k for k in MODEL_KINDS if any(r.kind == k for r in rows)]
    kinds += sorted({r.kind for r in rows} - set(kinds))
    return [
        {"kind": k, **{s: sum(getattr(r, s) for r in rows if r.kind == k) for s in _SUMS}}
        for k in kinds
    ]


def kind_report_json(rows: Sequence[KindService], start: float, end: float) -> dict[str, Any]:
    """The report as JSON: the period (epoch and ISO), `kinds` and `tenants` present, per-kind
    `totals`, and `data` with one entry per (tenant, kind) (see `KindService`)."""
    totals = _kind_totals(rows)
    return {
        "start": start,
        "end": end,
        "from": iso(start),
        "to": iso(end),
        "kinds": [t["kind"] for t in totals],
        "tenants": sorted({r.tenant for r in rows}),
        "totals": totals,
        "data": [asdict(r) for r in rows],
        "generated_at": time.time(),
    }


def service_by_kind(db: Database, start: float, end: float) -> dict[str, Any]:
    """Service per (tenant, model kind) for arrivals in [start, end), as JSON."""
    with db.reader() as r:
        rows = r.requests.service_by_kind(since=start, until=end)
    return kind_report_json(rows, start, end)
