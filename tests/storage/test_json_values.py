"""JSON columns keep every JSON shape exactly, on SQLite and PostgreSQL, and migration 0002
repairs audit rows that SQLite's NUMERIC affinity had turned into numbers."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from storage.db import Database
from storage.engine import create_engine_for
from storage.migrate import migrate

SHAPES: list[Any] = [
    28107,
    0,
    -7,
    1.0,
    1.5,
    -0.25,
    1e300,
    2**63 - 1,
    2**70,
    "x",
    "28107",
    "1.0",
    "",
    "null",
    True,
    False,
    None,
    [],
    {},
    [1, "a", None, True, 2.5],
    {"a": {"b": [1, 2.5, {"c": None}]}, "n": 3},
    "ünïcødé ✓ 日本 🚀",
    {"clé": ["日本", "\u0000 nul", 'quote " and \\']},
]


def _strict(value: Any) -> Any:
    """The value with its types spelled out, so 1 and 1.0 and True differ."""
    if isinstance(value, dict):
        return {k: _strict(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_strict(v) for v in value]
    return (type(value).__name__, value)


@pytest.mark.parametrize("value", SHAPES, ids=[repr(v)[:30] for v in SHAPES])
def test_every_json_shape_round_trips_through_the_audit_log(db: Database, value: Any) -> None:
    with db.repos() as r:
        written = r.audit.append(
            actor="a", action="knob.set", target="knob:g", old=value, new=[value], reason="x"
        )
    with db.reader() as r:
        (entry,) = r.audit.list()
    assert _strict(entry.old) == _strict(value)
    assert _strict(entry.new) == _strict([value])
    assert entry == written


def test_all_shapes_in_one_listing(db: Database) -> None:
    with db.repos() as r:
        for i, value in enumerate(SHAPES):
            r.audit.append(
                actor="a", action="knob.set", target="t", old=None, new=value, reason="x", at=i
            )
    with db.reader() as r:
        listed = [e.new for e in r.audit.list(limit=1000)]
    assert _strict(listed) == _strict(list(reversed(SHAPES)))


def test_migration_repairs_numbers_stored_under_numeric_affinity(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    migrate(url, revision="0001")
    engine = create_engine_for(url)
    with engine.begin() as conn:  # what the old code wrote: JSON text, affinity made numbers
        conn.execute(
            sa.text(
                "INSERT INTO audit_log (at, actor, action, target, old, new, reason) VALUES "
                "(1, 'a', 'knob.set', 'knob:g', 'null', '28107', 'x'),"
                "(2, 'a', 'knob.set', 'knob:h', '1.5', '{\"k\": [1]}', 'y')"
            )
        )
        kinds = conn.execute(sa.text("SELECT typeof(new) FROM audit_log ORDER BY id")).scalars()
        assert list(kinds) == ["integer", "text"]  # the defect the migration repairs
    engine.dispose()
    migrate(url)
    engine = create_engine_for(url)
    with engine.connect() as conn:
        kinds = conn.execute(sa.text("SELECT typeof(new) FROM audit_log ORDER BY id")).scalars()
        assert list(kinds) == ["text", "text"]
    engine.dispose()
    db = Database(url)
    try:
        with db.reader() as r:
            entries = r.audit.list()
        assert [(e.old, e.new) for e in entries] == [(1.5, {"k": [1]}), (None, 28107)]
    finally:
        db.dispose()
