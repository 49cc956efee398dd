"""SQLite's bulk statements as cached SQL text: the same rows, keys and errors as SQLAlchemy's
compiled statements, across the bound-parameter limit."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import insert, select, text

from storage import sqlite_bulk
from storage.db import Database
from storage.errors import RowsRejected
from storage.models import FairnessRollup, RequestRow, table_of
from storage.records import RequestRecord
from storage.repos.rollups import KEY_COLUMNS as _KEYS
from storage.write_guard import write_requests

REQUESTS, ROLLUPS = table_of(RequestRow), table_of(FairnessRollup)


@pytest.fixture
def sqlite_db(tmp_path: Path) -> Iterator[Database]:
    database = Database(f"sqlite:///{tmp_path / 'bulk.db'}")
    database.migrate()
    yield database
    database.dispose()


def _request(i: int, **changes: Any) -> dict[str, Any]:
    rec = RequestRecord(
        id=f"r{i:05d}", tenant="acme", arrival=1_000.0 + i, status="ok", n_in=3, n_out=4,
        unified_cost=11, slo_violated=i % 2 == 0, ttft_ms=None if i % 3 else 7.5,
        e2e_ms=12, policy="vtc",
    )  # fmt: skip
    return dataclasses.asdict(dataclasses.replace(rec, **changes))


def _rollup(i: int) -> dict[str, Any]:
    counters = dict.fromkeys(c.name for c in ROLLUPS.columns if c.name not in _KEYS)
    row = {name: (b"" if name.endswith("_hist") else i) for name in counters}
    return {"level": "agent", "window_s": 60, "bucket": 60 * i, "tenant": "t",
            "app": "a", "agent": f"g{i % 7}", **row}  # fmt: skip


def _stored(db: Database, table: Any) -> list[tuple[Any, ...]]:
    """Every row as SQLite holds it, with each value's storage class (typeof)."""
    cols = ", ".join(f"{c.name}, typeof({c.name})" for c in table.columns)
    with db.reader() as r:
        return [tuple(row) for row in r.session.execute(text(f"SELECT {cols} FROM {table.name}"))]


def test_rows_are_stored_as_the_compiled_insert_stores_them(tmp_path: Path) -> None:
    rows = [_request(i) for i in range(12)]
    fast, compiled = (
        Database(f"sqlite:///{tmp_path / 'a.db'}"),
        Database(f"sqlite:///{tmp_path / 'b.db'}"),
    )
    for database in (fast, compiled):
        database.migrate()
    with fast.repos() as r:
        assert sqlite_bulk.insert_new(r.session, REQUESTS, rows) == {(row["id"],) for row in rows}
    with compiled.repos() as r:
        r.session.execute(insert(REQUESTS), rows)
    assert _stored(fast, REQUESTS) == _stored(compiled, REQUESTS)
    kinds = {
        row[2 * REQUESTS.columns.keys().index("unified_cost") + 1]
        for row in _stored(fast, REQUESTS)
    }
    assert kinds == {"real"}  # the integer given to a float column is stored as REAL


def test_inserts_beyond_the_parameter_limit_return_exactly_the_new_keys(
    sqlite_db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_bulk, "MAX_VARIABLES", 5 * len(ROLLUPS.columns))  # 5 rows each
    first = [_rollup(i) for i in range(23)]
    with sqlite_db.repos() as r:
        assert sqlite_bulk.insert_new(r.session, ROLLUPS, first) == {
            tuple(row[k] for k in _KEYS) for row in first
        }
    again = [_rollup(i) for i in range(20, 31)]
    with sqlite_db.repos() as r:
        assert sqlite_bulk.insert_new(r.session, ROLLUPS, again) == {
            tuple(row[k] for k in _KEYS) for row in again[3:]
        }
        keys = [tuple(row[k] for k in _KEYS) for row in first[::2]] + [("app", 60, 0, "x", "", "")]
        found = sqlite_bulk.select_rows(r.session, ROLLUPS, keys)
    assert sorted(row["bucket"] for row in found) == sorted(row["bucket"] for row in first[::2])
    assert all(row["requests"] == row["bucket"] // 60 for row in found)


def test_update_touches_only_the_rows_named_by_key(sqlite_db: Database) -> None:
    rows = [_rollup(i) for i in range(6)]
    with sqlite_db.repos() as r:
        sqlite_bulk.insert_new(r.session, ROLLUPS, rows)
        changed = [{**rows[1], "requests": 100, "sum_ttft_ms": 2.5, "ttft_hist": b"\x01\x00"}]
        sqlite_bulk.update_rows(r.session, ROLLUPS, changed)
    with sqlite_db.reader() as r:
        stored = {row.bucket: row for row in r.session.execute(select(ROLLUPS))}
    assert stored[60].requests == 100 and stored[60].sum_ttft_ms == 2.5
    assert stored[60].ttft_hist == b"\x01\x00"
    assert [stored[60 * i].requests for i in (0, 2, 3, 4, 5)] == [0, 2, 3, 4, 5]


def test_a_value_its_column_type_refuses_is_refused_and_nothing_is_written(
    sqlite_db: Database,
) -> None:
    good = RequestRecord(id="good", tenant="t", arrival=1.0, status="ok")
    bad = dataclasses.replace(good, id="bad", slo_violated=2)  # type: ignore[arg-type]
    with pytest.raises(RowsRejected, match="not None, True, or False"):
        write_requests(sqlite_db, [good, bad])
    with sqlite_db.reader() as r:
        assert r.requests.count() == 0
