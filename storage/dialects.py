"""The few statements that differ between SQLite and PostgreSQL.

Bulk statements avoid thousands of bound parameters on PostgreSQL — psycopg parses such a
statement in Python, several µs per parameter — by passing one array per column and joining
`unnest(...)`; SQLite binds parameters in C, so plain multi-row statements serve it best,
sent as cached SQL text (`storage.sqlite_bulk`) rather than compiled per call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Integer,
    String,
    Table,
    TextClause,
    bindparam,
    cast,
    func,
    text,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import InstrumentedAttribute, Session

from storage import sqlite_bulk

Key = tuple[Any, ...]


def dialect_name(session: Session) -> str:
    """'sqlite' or 'postgresql'."""
    return session.get_bind().dialect.name


def insert_for(session: Session, table: Table) -> Any:
    """An INSERT supporting `on_conflict_do_nothing` / `on_conflict_do_update` on this dialect."""
    if dialect_name(session) == "postgresql":
        return postgresql.insert(table)
    return sqlite.insert(table)


def floor_div(
    session: Session, expr: ColumnElement[float] | InstrumentedAttribute[float], step: int
) -> ColumnElement[int]:
    """⌊expr / step⌋ as an integer (expr ≥ 0: SQLite's CAST truncates, which is then floor)."""
    if dialect_name(session) == "postgresql":
        return cast(func.floor(expr / step), Integer)
    return cast(expr / step, Integer)


def _arrays(session: Session, table: Table, names: Sequence[str]) -> str:
    dialect = session.get_bind().dialect
    return ", ".join(f"CAST(:{name} AS {_element_type(table, name, dialect)}[])" for name in names)


def _element_type(table: Table, name: str, dialect: Any) -> str:
    """The array element type of a column. Strings are cast without their length: an explicit
    CAST to VARCHAR(n) silently truncates, while storing into the column refuses a longer value
    (a row must be written as given or refused, never mangled)."""
    column_type = table.c[name].type
    if isinstance(column_type, String) and column_type.length is not None:
        column_type = String()
    return str(column_type.compile(dialect=dialect))


def _columnar(
    stmt: str, names: Sequence[str], rows: Sequence[dict[str, Any]]
) -> tuple[TextClause, dict[str, list[Any]]]:
    clause = text(stmt).bindparams(*(bindparam(name) for name in names))
    return clause, {name: [row[name] for row in rows] for name in names}


def _key_names(table: Table) -> list[str]:
    return [col.name for col in table.primary_key.columns]


def insert_new(session: Session, table: Table, rows: Sequence[dict[str, Any]]) -> set[Key]:
    """Insert `rows`, skipping those whose primary key exists; → the primary keys inserted.

    Only keys this statement inserted are returned, also under concurrent writers (a row
    another transaction inserts first is skipped, once that transaction commits).
    """
    if not rows:
        return set()
    if dialect_name(session) != "postgresql":
        return sqlite_bulk.insert_new(session, table, rows)
    keys = _key_names(table)
    names = [col.name for col in table.columns]
    sql = (
        f"INSERT INTO {table.name} ({', '.join(names)}) "
        f"SELECT * FROM unnest({_arrays(session, table, names)}) "
        f"ON CONFLICT ({', '.join(keys)}) DO NOTHING RETURNING {', '.join(keys)}"
    )
    clause, params = _columnar(sql, names, rows)
    return {tuple(row) for row in session.execute(clause, params)}


def lock_rows(session: Session, table: Table, keys: Sequence[Key]) -> list[dict[str, Any]]:
    """The rows with these primary keys, locked until the transaction ends (PostgreSQL row
    locks taken in key order; on SQLite the writing transaction already holds the lock)."""
    if not keys:
        return []
    if dialect_name(session) != "postgresql":
        return sqlite_bulk.select_rows(session, table, keys)
    key_names = _key_names(table)
    join = " AND ".join(f"t.{k} = k.{k}" for k in key_names)
    sql = (
        f"SELECT t.* FROM {table.name} AS t JOIN unnest({_arrays(session, table, key_names)}) "
        f"AS k({', '.join(key_names)}) ON {join} "
        f"ORDER BY {', '.join(f't.{k}' for k in key_names)} FOR UPDATE OF t"
    )
    clause, params = _columnar(sql, key_names, [dict(zip(key_names, k, strict=True)) for k in keys])
    result = session.execute(clause.columns(*table.columns), params)
    return [dict(row) for row in result.mappings()]


def update_rows(session: Session, table: Table, rows: Sequence[dict[str, Any]]) -> None:
    """Overwrite the non-key columns of existing rows (each row holds every column)."""
    if not rows:
        return
    if dialect_name(session) != "postgresql":
        sqlite_bulk.update_rows(session, table, rows)
        return
    keys = _key_names(table)
    values = [col.name for col in table.columns if col.name not in keys]
    names = keys + values
    sql = (
        f"UPDATE {table.name} AS t SET {', '.join(f'{v} = u.{v}' for v in values)} "
        f"FROM unnest({_arrays(session, table, names)}) AS u({', '.join(names)}) "
        f"WHERE {' AND '.join(f't.{k} = u.{k}' for k in keys)}"
    )
    clause, params = _columnar(sql, names, rows)
    session.execute(clause, params)
