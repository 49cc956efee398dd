"""Weights within the API's range: 1e-6 ≤ weight ≤ 1e6 in SQL too (was weight > 0).

The API and CLI have refused weights outside that range since the range was introduced, but a
row written before (or by hand) could hold 1e-9, and the scheduler charges `cost / weight`.
Existing weights are clamped into the range, then the check replaces `weight > 0`.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-28
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("tenants", "applications", "agents")
MIN_WEIGHT = 1e-6
MAX_WEIGHT = 1e6
IN_RANGE = f"weight >= {MIN_WEIGHT!r} AND weight <= {MAX_WEIGHT!r}"


def upgrade() -> None:
    for table in TABLES:
        op.execute(
            sa.text(
                f"UPDATE {table} SET weight = CASE WHEN weight < :low THEN :low "
                "WHEN weight > :high THEN :high ELSE weight END "
                "WHERE weight < :low OR weight > :high"
            ).bindparams(low=MIN_WEIGHT, high=MAX_WEIGHT)
        )
        with op.batch_alter_table(table) as batch:
            batch.drop_constraint(op.f(f"ck_{table}_weight_positive"), type_="check")
            batch.create_check_constraint(op.f(f"ck_{table}_weight_in_range"), IN_RANGE)


def downgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.drop_constraint(op.f(f"ck_{table}_weight_in_range"), type_="check")
            batch.create_check_constraint(op.f(f"ck_{table}_weight_positive"), "weight > 0")
