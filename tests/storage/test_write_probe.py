"""The recorder's write probe: a real insert that is rolled back, so it tells a database that
takes writes from one that refuses them all, and leaves nothing behind."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from storage.db import Database
from storage.errors import StorageUnavailable
from storage.write_guard import probe_writes


def _rows(db: Database) -> tuple[int, int]:
    with db.engine.connect() as conn:
        requests = conn.execute(sa.text("SELECT count(*) FROM requests")).scalar_one()
        rollups = conn.execute(sa.text("SELECT count(*) FROM fairness_rollups")).scalar_one()
    return int(requests), int(rollups)


def test_the_probe_writes_and_leaves_nothing(db: Database) -> None:
    probe_writes(db)
    probe_writes(db)
    assert _rows(db) == (0, 0)


@pytest.mark.postgres
@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
def test_a_database_that_refuses_every_insert_fails_the_probe(db: Database) -> None:
    """Refused by a trigger (an error of no outage class, as a row at fault would raise): the
    probe must still fail, so the refused rows are not taken for the rows' fault."""
    with db.engine.begin() as conn:
        conn.execute(
            sa.text(
                "CREATE FUNCTION refuse_all() RETURNS trigger AS $$ BEGIN "
                "RAISE EXCEPTION 'refused'; END $$ LANGUAGE plpgsql"
            )
        )
        conn.execute(
            sa.text(
                "CREATE TRIGGER refuse_all BEFORE INSERT ON requests "
                "FOR EACH ROW EXECUTE FUNCTION refuse_all()"
            )
        )
    with pytest.raises(StorageUnavailable, match="database probe failed"):
        probe_writes(db)
