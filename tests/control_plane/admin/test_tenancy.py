"""Node changes over what was read: `update_node` with `expected` compares under a row lock, so
a change decided on a stale read never replaces a later one — on SQLite and PostgreSQL."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from control_plane.admin import tenancy
from storage.db import Database
from storage.errors import ChangedMeanwhile


@pytest.fixture
def db(db_url: str) -> Iterator[Database]:
    database = Database(db_url)
    database.migrate()
    with database.repos() as r:
        r.tenants.create_tenant(name="acme")
    yield database
    database.dispose()


def test_a_change_over_a_stale_read_is_refused_and_writes_nothing(db: Database) -> None:
    tenancy.update_node(db, ("acme",), {"weight": 2.0}, actor="a", reason="first")
    with pytest.raises(ChangedMeanwhile, match=r"tenant acme changed .*weight is 2\.0 now"):
        tenancy.update_node(
            db, ("acme",), {"weight": 5.0}, actor="b", reason="stale", expected={"weight": 1.0}
        )
    assert tenancy.get_node(db, ("acme",)).weight == 2.0
    with db.reader() as r:
        assert [a.reason for a in r.audit.list(action="tenant.update")] == ["first"]
    done = tenancy.update_node(
        db, ("acme",), {"weight": 5.0}, actor="b", reason="fresh", expected={"weight": 2.0}
    )
    assert done.weight == 5.0


def test_a_change_racing_an_uncommitted_one_sees_it_once_committed(db: Database) -> None:
    """Regression guard for PostgreSQL's READ COMMITTED: without the row lock the second
    change read the weight before the first committed, passed its check, and then overwrote
    the first (a lost update). The first change commits only once the second is seen waiting
    on the database (so the test cannot pass by starting the second change too late)."""
    locked, release = threading.Event(), threading.Event()
    holder_pid: list[int] = []

    def first() -> None:
        with db.repos() as r:
            assert r.tenants.get_tenant(name="acme", for_update=True) is not None
            r.tenants.update_tenant(name="acme", changes={"weight": 3.0})
            if db.engine.dialect.name == "postgresql":
                holder_pid.append(
                    int(r.session.execute(sa.text("SELECT pg_backend_pid()")).scalar_one())
                )
            locked.set()
            assert release.wait(30)

    outcome: list[object] = []

    def second() -> None:
        try:
            tenancy.update_node(
                db, ("acme",), {"weight": 7.0}, actor="b", reason="r", expected={"weight": 1.0}
            )
            outcome.append("written over the uncommitted change")
        except ChangedMeanwhile as exc:
            outcome.append(exc)

    holder = threading.Thread(target=first)
    racer = threading.Thread(target=second)
    holder.start()
    try:
        assert locked.wait(10)
        racer.start()
        _wait_until_blocked(db, racer, holder_pid)
    finally:
        release.set()
        holder.join(10)
        if racer.ident is not None:  # started
            racer.join(10)
    assert len(outcome) == 1 and isinstance(outcome[0], ChangedMeanwhile), outcome
    assert "weight is 3.0 now" in str(outcome[0])
    assert tenancy.get_node(db, ("acme",)).weight == 3.0


def _wait_until_blocked(db: Database, racer: threading.Thread, holder_pid: list[int]) -> None:
    """Until `racer` waits for the lock the first change holds: on PostgreSQL a backend that
    the holder's backend blocks (the row lock, or the UPDATE without it); on SQLite the
    racer's thread inside BEGIN IMMEDIATE (the write lock), seen on two polls in a row."""
    deadline = time.monotonic() + 10
    seen = 0
    while time.monotonic() < deadline:
        assert racer.is_alive(), "the second change finished without waiting for the first"
        seen = seen + 1 if _blocked(db, racer, holder_pid) else 0
        if seen >= 2:
            return
        time.sleep(0.01)
    raise AssertionError("the second change never waited for the first")


def _blocked(db: Database, racer: threading.Thread, holder_pid: list[int]) -> bool:
    if db.engine.dialect.name == "postgresql":
        query = sa.text(
            "SELECT count(*) FROM pg_stat_activity WHERE :holder = ANY(pg_blocking_pids(pid))"
        )
        with db.engine.connect() as conn:
            return bool(conn.execute(query, {"holder": holder_pid[0]}).scalar())
    frame = sys._current_frames().get(racer.ident or -1)
    while frame is not None:
        if frame.f_code.co_name == "_sqlite_begin" and frame.f_locals.get("mode") == "IMMEDIATE":
            return True
        frame = frame.f_back
    return False
