"""Declarative base shared by every table: one metadata, deterministic constraint names."""

from __future__ import annotations

from typing import Any, cast

from sqlalchemy import MetaData, Table
from sqlalchemy.orm import DeclarativeBase

# Deterministic names let Alembic migrations refer to (and drop) constraints on every dialect.
NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    """Base of every Arbiter table; `to_dict` gives the column values of a row."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)

    def to_dict(self) -> dict[str, Any]:
        """Column name → value, for building immutable records and audit snapshots."""
        return {col.key: getattr(self, col.key) for col in self.__mapper__.column_attrs}


def table_of(model: type[Base]) -> Table:
    """The Core table of a mapped class (for bulk and dialect-specific statements)."""
    return cast(Table, model.__table__)
