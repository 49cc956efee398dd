"""Tenants, their applications and agents (weights, tiers, SLO defaults) and hashed API keys."""

from __future__ import annotations

import time

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Double,
    ForeignKey,
    Integer,
    String,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from storage.models.base import Base
from storage.repos.fields import MAX_WEIGHT, MIN_WEIGHT

NAME_LEN = 128
WEIGHT_IN_RANGE = f"weight >= {MIN_WEIGHT!r} AND weight <= {MAX_WEIGHT!r}"
"""The API's weight range, held by SQL too (migration 0006)."""


class SloDefaults:
    """Columns shared by every node of the hierarchy: SLO targets in ms, unset = None."""

    slo_ttft_ms: Mapped[float | None] = mapped_column(Double)
    slo_tpot_ms: Mapped[float | None] = mapped_column(Double)
    slo_e2e_ms: Mapped[float | None] = mapped_column(Double)


class Tenant(SloDefaults, Base):
    """A tenant; deleting it deletes its applications, agents and keys (not its history)."""

    __tablename__ = "tenants"
    __table_args__ = (
        CheckConstraint(WEIGHT_IN_RANGE, name="weight_in_range"),
        CheckConstraint("priority_tier >= 0", name="tier_nonnegative"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(NAME_LEN), unique=True)
    weight: Mapped[float] = mapped_column(Double, default=1.0)
    priority_tier: Mapped[int] = mapped_column(Integer, default=0)
    queue_cap: Mapped[int | None] = mapped_column(Integer)
    rate_limit_rps: Mapped[float | None] = mapped_column(Double)
    token_budget: Mapped[int | None] = mapped_column(BigInteger)
    created_at: Mapped[float] = mapped_column(Double, default=time.time)

    apps: Mapped[list[Application]] = relationship(
        back_populates="tenant", cascade="all, delete-orphan", passive_deletes=True, lazy="raise"
    )
    keys: Mapped[list[ApiKey]] = relationship(
        back_populates="tenant", cascade="all, delete-orphan", passive_deletes=True, lazy="raise"
    )


class Application(SloDefaults, Base):
    """An application of one tenant; names are unique within the tenant."""

    __tablename__ = "applications"
    __table_args__ = (
        UniqueConstraint("tenant_id", "name"),
        CheckConstraint(WEIGHT_IN_RANGE, name="weight_in_range"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    tenant_id: Mapped[int] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(NAME_LEN))
    weight: Mapped[float] = mapped_column(Double, default=1.0)
    created_at: Mapped[float] = mapped_column(Double, default=time.time)

    tenant: Mapped[Tenant] = relationship(back_populates="apps", lazy="raise")
    agents: Mapped[list[Agent]] = relationship(
        back_populates="app", cascade="all, delete-orphan", passive_deletes=True, lazy="raise"
    )


class Agent(SloDefaults, Base):
    """An agent of one application; `priority_tier` (optional) overrides the tenant's tier."""

    __tablename__ = "agents"
    __table_args__ = (
        UniqueConstraint("app_id", "name"),
        CheckConstraint(WEIGHT_IN_RANGE, name="weight_in_range"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    app_id: Mapped[int] = mapped_column(ForeignKey("applications.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(NAME_LEN))
    weight: Mapped[float] = mapped_column(Double, default=1.0)
    priority_tier: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[float] = mapped_column(Double, default=time.time)

    app: Mapped[Application] = relationship(back_populates="agents", lazy="raise")


class ApiKey(Base):
    """An API key: only its SHA-256 hex digest is stored, plus a short prefix for display."""

    __tablename__ = "api_keys"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    tenant_id: Mapped[int] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"), index=True)
    prefix: Mapped[str] = mapped_column(String(16))
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    label: Mapped[str | None] = mapped_column(String(NAME_LEN))
    created_at: Mapped[float] = mapped_column(Double, default=time.time)
    revoked_at: Mapped[float | None] = mapped_column(Double)

    tenant: Mapped[Tenant] = relationship(back_populates="keys", lazy="raise")
