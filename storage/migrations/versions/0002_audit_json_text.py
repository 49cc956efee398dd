"""Audit log JSON as TEXT on SQLite, so every JSON value reads back as written.

A SQLite column declared `JSON` has NUMERIC affinity: the JSON text `28107` was stored as the
integer 28107 (and `1.0` as 1), which could not be parsed back, so every later read of the audit
log failed. The table is rebuilt with TEXT columns; copying converts numbers stored that way
back to their JSON text. PostgreSQL's `json` columns already keep the text: nothing changes there.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COLUMNS = ("old", "new")


def _retype(old: sa.types.TypeEngine[Any], new: sa.types.TypeEngine[Any]) -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    with op.batch_alter_table("audit_log", recreate="always") as batch:
        for column in _COLUMNS:
            batch.alter_column(column, existing_type=old, type_=new, existing_nullable=False)


def upgrade() -> None:
    _retype(sa.JSON(), sa.Text())


def downgrade() -> None:
    _retype(sa.Text(), sa.JSON())
