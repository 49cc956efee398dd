"""History: one row per request, and the audit log.

Requests carry the hierarchy as names, not foreign keys, so a deleted tenant's history stays.
Times are float epoch seconds (UTC); latencies and SLO targets are milliseconds.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import Boolean, CheckConstraint, Double, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from storage.models.base import Base
from storage.models.json_value import JsonValue
from storage.models.tenancy import NAME_LEN


class RequestRow(Base):
    """One finished request; the recorder inserts it once (idempotent on `id`), except that a
    provisional row (the in-flight audit's) is replaced by the request's real completion
    (`RequestRepo.write_many`)."""

    __tablename__ = "requests"
    __table_args__ = (
        CheckConstraint(
            "status IN ('ok', 'error', 'aborted', 'timeout', 'withdrawn')", name="status"
        ),
        Index(None, "arrival"),
        Index(None, "tenant", "arrival"),
        Index(None, "tenant", "app", "agent", "arrival"),
    )

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    tenant: Mapped[str] = mapped_column(String(NAME_LEN))
    app: Mapped[str] = mapped_column(String(NAME_LEN))
    agent: Mapped[str] = mapped_column(String(NAME_LEN))
    workflow: Mapped[str | None] = mapped_column(String(NAME_LEN))
    upstream: Mapped[str | None] = mapped_column(String(NAME_LEN))
    model: Mapped[str] = mapped_column(String(NAME_LEN))
    task: Mapped[str | None] = mapped_column(String(NAME_LEN))
    priority: Mapped[int] = mapped_column(Integer)
    arrival: Mapped[float] = mapped_column(Double)
    dispatched_at: Mapped[float | None] = mapped_column(Double)
    first_token_at: Mapped[float | None] = mapped_column(Double)
    finished_at: Mapped[float | None] = mapped_column(Double)
    n_in: Mapped[int] = mapped_column(Integer)
    n_out: Mapped[int] = mapped_column(Integer)
    unified_cost: Mapped[float] = mapped_column(Double)
    slo_ttft_ms: Mapped[float | None] = mapped_column(Double)
    slo_tpot_ms: Mapped[float | None] = mapped_column(Double)
    slo_e2e_ms: Mapped[float | None] = mapped_column(Double)
    slo_violated: Mapped[bool] = mapped_column(Boolean)
    ttft_ms: Mapped[float | None] = mapped_column(Double)
    tpot_ms: Mapped[float | None] = mapped_column(Double)
    e2e_ms: Mapped[float | None] = mapped_column(Double)
    queue_ms: Mapped[float | None] = mapped_column(Double)
    worker: Mapped[str | None] = mapped_column(String(NAME_LEN))
    policy: Mapped[str | None] = mapped_column(String(200))  # the plug-in name rule's longest
    status: Mapped[str] = mapped_column(String(16))
    error: Mapped[str | None] = mapped_column(Text)
    attempts: Mapped[int] = mapped_column(Integer, default=1)
    images: Mapped[int | None] = mapped_column(Integer)
    """Images generated (image models; `n_out` is then images × denoising steps)."""


class AuditEntry(Base):
    """One audited change (append-only): actor, action, target, old and new JSON, reason."""

    __tablename__ = "audit_log"
    __table_args__ = (Index(None, "at"), Index(None, "target", "at"))

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[float] = mapped_column(Double, default=time.time)
    actor: Mapped[str] = mapped_column(String(NAME_LEN))
    action: Mapped[str] = mapped_column(String(64))
    target: Mapped[str] = mapped_column(String(256))
    old: Mapped[Any] = mapped_column(JsonValue)
    new: Mapped[Any] = mapped_column(JsonValue)
    reason: Mapped[str] = mapped_column(Text)
