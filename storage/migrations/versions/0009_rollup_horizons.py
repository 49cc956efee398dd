"""Rollup horizons: before which time a rollup resolution (the minutes) was pruned.

`arbiter prune-history --minute-rollups-older-than-days` records the hour-aligned cut here
before it deletes minute rows, and reports read hour rows before it. Downgrading drops the
table: an older build then reads the missing minute rows as empty (run it only where no
minute rollups were pruned, or accept reports whose ragged edges there undercount).

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "rollup_horizons",
        sa.Column("window_s", sa.Integer(), nullable=False),
        sa.Column("horizon", sa.BigInteger(), nullable=False),
        sa.CheckConstraint("window_s IN (60, 3600, 86400)", name=op.f("ck_rollup_horizons_window")),
        sa.PrimaryKeyConstraint("window_s", name=op.f("pk_rollup_horizons")),
    )


def downgrade() -> None:
    op.drop_table("rollup_horizons")
