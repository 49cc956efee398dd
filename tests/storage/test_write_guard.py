"""Telling an outage from a fault: what `is_outage` calls an outage, from errors a real
database raised."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy import exc as sa_exc

from storage.db import Database
from storage.errors import RowsRejected, StorageUnavailable
from storage.write_guard import AuditDraft, classified, is_outage, write_audit


def _raised(db: Database, statement: str) -> BaseException:
    with pytest.raises(sa_exc.DBAPIError) as caught, db.engine.connect() as conn:
        conn.execute(sa.text(statement))
    return caught.value


def test_an_unreachable_database_is_an_outage_and_a_bad_statement_is_not(
    db: Database, tmp_path: Path
) -> None:
    gone = Database(f"sqlite:///{tmp_path / 'missing' / 'arbiter.db'}")  # no such directory
    try:
        unreachable = _raised(gone, "SELECT 1")
    finally:
        gone.dispose()
    assert is_outage(unreachable)
    assert is_outage(StorageUnavailable("down"))
    refused = _raised(db, "INSERT INTO requests (id) VALUES (NULL)")  # a row at fault
    assert not is_outage(refused)
    # a fault of the schema or the code, not of the database's health: reported, not retried
    assert not is_outage(_raised(db, "SELECT * FROM no_such_table"))
    assert not is_outage(_raised(db, "SELEC 1"))
    with pytest.raises(RowsRejected), classified():
        raise refused
    # Python's own: nothing says the database raised them (an asyncio timeout is TimeoutError)
    assert not is_outage(TimeoutError()) and not is_outage(ConnectionError())
    assert not is_outage(RuntimeError("a bug"))


def test_a_postgresql_server_that_refuses_connections_is_an_outage() -> None:
    closed = Database("postgresql+psycopg://postgres@127.0.0.1:1/test")  # nothing listens
    try:
        assert is_outage(_raised(closed, "SELECT 1"))
    finally:
        closed.dispose()


def test_a_replayed_audit_batch_of_many_entries_is_not_written_twice(db: Database) -> None:
    """Regression (a second review): `write_audit` looked for an entry already written among
    the 100 newest of its action since its time, so one with 100 newer entries of its action
    was appended again on a replay (a crash between the commit and the ack, a claim) — a
    reconcile stamps every change of a fleet of over 100 workers with one time."""
    drafts = [
        AuditDraft("controller", "policy.switch", "policy", {"name": "a"}, {"name": f"p{i}"},
                   f"rules: {i}; view {{}}", 1_800_000_000.0 + i)
        for i in range(150)
    ]  # fmt: skip
    assert write_audit(db, drafts) == 150
    assert write_audit(db, drafts) == 0  # the same batch, replayed
    with db.reader() as r:
        assert len(r.audit.list(action="policy.switch", limit=1000)) == 150
