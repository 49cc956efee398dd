"""Audited operator-account changes, shared by the admin API and `arbiter admin operators`.

Every create and revoke is in the audit log (action `operator.create` / `operator.revoke`,
target `operator:<name>`) with the name and role, never the token.
"""

from __future__ import annotations

from typing import Any

from storage.db import Database
from storage.repos.operators import OperatorRecord


def _public(record: OperatorRecord) -> dict[str, Any]:
    return {"name": record.name, "role": record.role, "revoked": record.revoked_at is not None}


def create_operator(
    db: Database, *, name: str, role: str, actor: str, reason: str
) -> tuple[OperatorRecord, str]:
    """A new operator → (its record, its token: shown once, never stored)."""
    with db.repos() as r:
        record, token = r.operators.create(name=name, role=role)
        r.audit.append(
            actor=actor,
            action="operator.create",
            target=f"operator:{name}",
            old=None,
            new=_public(record),
            reason=reason,
        )
        return record, token


def revoke_operator(db: Database, *, name: str, actor: str, reason: str) -> OperatorRecord:
    """Revoke an operator's token (idempotent; only the first revocation is audited)."""
    with db.repos() as r:
        before = r.operators.get(name=name)
        record = r.operators.revoke(name=name)
        if before.revoked_at is None:
            r.audit.append(
                actor=actor,
                action="operator.revoke",
                target=f"operator:{name}",
                old=_public(before),
                new=_public(record),
                reason=reason,
            )
        return record


def list_operators(db: Database) -> list[OperatorRecord]:
    """Every operator, revoked ones included, oldest first (never a token or its hash)."""
    with db.reader() as r:
        return r.operators.list()
