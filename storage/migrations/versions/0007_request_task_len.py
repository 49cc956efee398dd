"""A request's `task` as long as the door accepts it: VARCHAR(128), was VARCHAR(64).

`X-Arbiter-Task` is checked against the name rule (1–128 characters) at the door, so a
request with a 65–128 character task was served, and its row refused by PostgreSQL (value
too long) and dead-lettered by the recorder; SQLite, which checks no lengths, kept it.
Downgrading cuts longer tasks to 64 characters (the rows stay).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("requests") as batch:
        batch.alter_column(
            "task", existing_type=sa.String(64), type_=sa.String(128), existing_nullable=True
        )


def downgrade() -> None:
    op.execute(sa.text("UPDATE requests SET task = substr(task, 1, 64) WHERE length(task) > 64"))
    with op.batch_alter_table("requests") as batch:
        batch.alter_column(
            "task", existing_type=sa.String(128), type_=sa.String(64), existing_nullable=True
        )
