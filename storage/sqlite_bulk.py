"""The bulk statements of `storage.dialects` on SQLite, sent as cached SQL text.

The recorder writes a batch of request rows and their rollup deltas every 0.1 s. Through
SQLAlchemy's compiled statements each row cost 36–39 µs (parameter construction, the
insert-many-values batching, cache-key generation) — on a box where that burst lands beside
the requests being served. These functions send the same statements as plain SQL with `?`
placeholders, built once per table and row count, through the session's connection (so the
transaction, the write lock and SQLAlchemy's error wrapping are unchanged). Every value goes
through its column type's own bind processor, and every value read back through its result
processor, exactly as the compiled path would.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

from sqlalchemy import Table
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import Session

Key = tuple[Any, ...]
Processor = Callable[[Any], Any] | None
MAX_VARIABLES = 32766
"""SQLite's default bound-parameter limit (since 3.32)."""


class _Shape:
    """What the statements of one table need: quoted names and the columns' processors."""

    def __init__(self, table: Table, dialect: Dialect) -> None:
        quote = dialect.identifier_preparer.quote
        self.table = quote(table.name)
        self.names = [col.name for col in table.columns]
        self.quoted = [quote(name) for name in self.names]
        self.keys = [col.name for col in table.primary_key.columns]
        self.quoted_keys = [quote(name) for name in self.keys]
        impls = {col.name: col.type.dialect_impl(dialect) for col in table.columns}
        self.binds: dict[str, Processor] = {
            name: impl.bind_processor(dialect) for name, impl in impls.items()
        }
        self.results: dict[str, Processor] = {
            name: impl.result_processor(dialect, None) for name, impl in impls.items()
        }


@lru_cache(maxsize=64)
def _shape(table: Table, dialect: Dialect) -> _Shape:
    return _Shape(table, dialect)


def _values(n_rows: int, n_cols: int) -> str:
    one = "(" + ", ".join("?" * n_cols) + ")"
    return ", ".join([one] * n_rows)


@lru_cache(maxsize=64)
def _insert_sql(table: Table, dialect: Dialect, n_rows: int) -> str:
    s = _shape(table, dialect)
    return (
        f"INSERT INTO {s.table} ({', '.join(s.quoted)}) VALUES {_values(n_rows, len(s.names))} "
        f"ON CONFLICT ({', '.join(s.quoted_keys)}) DO NOTHING "
        f"RETURNING {', '.join(s.quoted_keys)}"
    )


@lru_cache(maxsize=64)
def _select_sql(table: Table, dialect: Dialect, n_keys: int) -> str:
    s = _shape(table, dialect)
    return (
        f"SELECT {', '.join(s.quoted)} FROM {s.table} "
        f"WHERE ({', '.join(s.quoted_keys)}) IN (VALUES {_values(n_keys, len(s.keys))})"
    )


@lru_cache(maxsize=64)
def _update_sql(table: Table, dialect: Dialect) -> str:
    s = _shape(table, dialect)
    values = [q for name, q in zip(s.names, s.quoted, strict=True) if name not in s.keys]
    return (
        f"UPDATE {s.table} SET {', '.join(f'{q} = ?' for q in values)} "
        f"WHERE {' AND '.join(f'{q} = ?' for q in s.quoted_keys)}"
    )


def _bound(shape: _Shape, names: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[Any]:
    """The values of `rows` (each in the order of `names`), flat, as the driver takes them."""
    binds = shape.binds
    processed = [(i, p) for i, name in enumerate(names) if (p := binds[name]) is not None]
    flat: list[Any] = []
    for values in rows:
        bound = list(values)
        for i, process in processed:
            value = bound[i]
            if value is not None:
                bound[i] = process(value)
        flat += bound
    return flat


def _chunks(items: Sequence[Any], per_item: int) -> list[Sequence[Any]]:
    size = max(1, MAX_VARIABLES // per_item)
    return [items[i : i + size] for i in range(0, len(items), size)]


def insert_new(session: Session, table: Table, rows: Sequence[dict[str, Any]]) -> set[Key]:
    """`storage.dialects.insert_new` on SQLite (every row holds every column)."""
    conn = session.connection()
    shape = _shape(table, conn.dialect)
    inserted: set[Key] = set()
    for chunk in _chunks(rows, len(shape.names)):
        names = shape.names
        params = _bound(shape, names, [[row[name] for name in names] for row in chunk])
        sql = _insert_sql(table, conn.dialect, len(chunk))
        inserted.update(tuple(r) for r in conn.exec_driver_sql(sql, tuple(params)))
    return inserted


def select_rows(session: Session, table: Table, keys: Sequence[Key]) -> list[dict[str, Any]]:
    """The rows with these primary keys, as column-name → value (the writing transaction
    already holds SQLite's lock)."""
    conn = session.connection()
    shape = _shape(table, conn.dialect)
    found: list[dict[str, Any]] = []
    for chunk in _chunks(keys, len(shape.keys)):
        params = _bound(shape, shape.keys, chunk)
        sql = _select_sql(table, conn.dialect, len(chunk))
        for raw in conn.exec_driver_sql(sql, tuple(params)):
            row = {}
            for name, value in zip(shape.names, raw, strict=True):
                process = shape.results[name]
                row[name] = value if process is None else process(value)
            found.append(row)
    return found


def update_rows(session: Session, table: Table, rows: Sequence[dict[str, Any]]) -> None:
    """`storage.dialects.update_rows` on SQLite: one prepared UPDATE, executed per row."""
    conn = session.connection()
    shape = _shape(table, conn.dialect)
    order = [name for name in shape.names if name not in shape.keys] + shape.keys
    width = len(order)
    flat = _bound(shape, order, [[row[name] for name in order] for row in rows])
    params = [tuple(flat[i : i + width]) for i in range(0, len(flat), width)]
    conn.exec_driver_sql(_update_sql(table, conn.dialect), params)
