"""Node changes over what was read: `update_node` with `expected` compares under a row lock, so
a change decided on a stale read never replaces a later one — on SQLite and PostgreSQL."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

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
    the first (a lost update)."""
    locked = threading.Event()

    def first() -> None:
        with db.repos() as r:
            assert r.tenants.get_tenant(name="acme", for_update=True) is not None
            r.tenants.update_tenant(name="acme", changes={"weight": 3.0})
            locked.set()
            time.sleep(0.5)  # the second change starts meanwhile and must wait

    other = threading.Thread(target=first)
    other.start()
    assert locked.wait(10)
    try:
        with pytest.raises(ChangedMeanwhile, match=r"weight is 3\.0 now"):
            tenancy.update_node(
                db, ("acme",), {"weight": 7.0}, actor="b", reason="r", expected={"weight": 1.0}
            )
    finally:
        other.join(10)
    assert tenancy.get_node(db, ("acme",)).weight == 3.0
