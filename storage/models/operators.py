"""Operator accounts of the admin API: a name, a role and the SHA-256 digest of a token."""

from __future__ import annotations

import time

from sqlalchemy import CheckConstraint, Double, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from storage.models.base import Base

ROLES = ("viewer", "operator", "admin")
"""Least to most privileged: viewer reads; operator also steers (weights, knobs, policy,
drain); admin also changes what exists (operators, keys, tenants, models, workers)."""


class OperatorAccount(Base):
    """A named operator; only the token's digest is stored, and a revoked row never
    authenticates again (names stay taken, so the audit log's actors stay unambiguous)."""

    __tablename__ = "operators"
    __table_args__ = (CheckConstraint("role IN ('viewer', 'operator', 'admin')", name="role"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(128), unique=True)
    role: Mapped[str] = mapped_column(String(16))
    prefix: Mapped[str] = mapped_column(String(16))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[float] = mapped_column(Double, default=time.time)
    revoked_at: Mapped[float | None] = mapped_column(Double)
