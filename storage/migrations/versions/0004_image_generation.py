"""Image generation: an image model's generation rule, and the images a request generated.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from storage.models.json_value import JsonValue

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("models") as batch:
        batch.add_column(sa.Column("generation", JsonValue(), nullable=True))
    with op.batch_alter_table("requests") as batch:
        batch.add_column(sa.Column("images", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("requests") as batch:
        batch.drop_column("images")
    with op.batch_alter_table("models") as batch:
        batch.drop_column("generation")
