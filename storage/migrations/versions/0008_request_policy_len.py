"""A request's `policy` as long as a plug-in name may be: VARCHAR(200), was VARCHAR(64).

The admin API took policy names of up to 200 characters (a plug-in named by its
`module:Class` path), so while such a policy ran PostgreSQL refused every request row (value
too long) and the recorder dead-lettered them; SQLite, which checks no lengths, kept them.
Downgrading cuts longer names to 64 characters (the rows stay).

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("requests") as batch:
        batch.alter_column(
            "policy", existing_type=sa.String(64), type_=sa.String(200), existing_nullable=True
        )


def downgrade() -> None:
    op.execute(
        sa.text("UPDATE requests SET policy = substr(policy, 1, 64) WHERE length(policy) > 64")
    )
    with op.batch_alter_table("requests") as batch:
        batch.alter_column(
            "policy", existing_type=sa.String(200), type_=sa.String(64), existing_nullable=True
        )
