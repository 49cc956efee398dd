"""The audit log: append-only record of every operator change."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from storage.errors import InvalidValueError
from storage.models import AuditEntry
from storage.records import AuditRecord, record_from

APPEND_LOCK = 0x6172_6269_7465_7261
"""PostgreSQL advisory-lock key that serializes checked appends (`AuditRepo.exclusive`)."""


class AuditRepo:
    """Appends and lists audit entries; entries are never updated or deleted. `old` and `new`
    are any JSON values; a change without a reason is refused."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def append(
        self,
        *,
        actor: str,
        action: str,
        target: str,
        old: Any,
        new: Any,
        reason: str,
        at: float | None = None,
    ) -> AuditRecord:
        """Record one change (e.g. action 'policy.switch', target 'policy')."""
        if not reason.strip():
            raise InvalidValueError("an audited change needs a reason")
        row = AuditEntry(
            at=time.time() if at is None else at,
            actor=actor,
            action=action,
            target=target,
            old=old,
            new=new,
            reason=reason,
        )
        self.session.add(row)
        self.session.flush()
        return record_from(AuditRecord, row.to_dict())

    def exclusive(self) -> None:
        """Until this transaction ends, no other transaction that calls `exclusive` runs past
        it: a look for an entry and its append then cannot interleave with another writer's
        (two recorders writing one replayed switch). PostgreSQL: a transaction-scoped
        advisory lock; SQLite already runs one writing transaction at a time."""
        if self.session.get_bind().dialect.name == "postgresql":
            self.session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": APPEND_LOCK})

    def at_time(self, *, action: str, at: float) -> list[AuditRecord]:
        """Every entry of `action` made at exactly `at` (however many newer ones exist)."""
        stmt = select(AuditEntry).where(AuditEntry.action == action, AuditEntry.at == at)
        return [record_from(AuditRecord, row.to_dict()) for row in self.session.scalars(stmt)]

    def list(
        self,
        *,
        target: str | None = None,
        action: str | None = None,
        since: float | None = None,
        limit: int = 100,
    ) -> list[AuditRecord]:
        """Entries, newest first, optionally filtered."""
        stmt = select(AuditEntry).order_by(AuditEntry.at.desc(), AuditEntry.id.desc())
        if target is not None:
            stmt = stmt.where(AuditEntry.target == target)
        if action is not None:
            stmt = stmt.where(AuditEntry.action == action)
        if since is not None:
            stmt = stmt.where(AuditEntry.at >= since)
        rows = self.session.scalars(stmt.limit(limit))
        return [record_from(AuditRecord, row.to_dict()) for row in rows]
