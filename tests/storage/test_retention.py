"""Pruning the request history: the oldest rows go in batches, the rollups (and so the
reports' totals) stay, and a cut younger than a day is refused."""

from __future__ import annotations

import dataclasses

import pytest

from storage.db import Database
from storage.retention import prune_history
from tests.storage.test_requests import _request

DAY = 86_400.0
NOW = 1_800_000_000.0


def _rows(db: Database, arrivals: list[float]) -> None:
    with db.repos() as r:
        rows = [dataclasses.replace(_request(i), arrival=a) for i, a in enumerate(arrivals)]
        r.requests.insert_many(rows)


def test_rows_before_the_cut_go_in_batches_and_the_rollups_stay(db: Database) -> None:
    old = [NOW - 10 * DAY + i for i in range(25)]
    _rows(db, [*old, NOW - 2 * DAY, NOW - 60.0])
    with db.reader() as r:
        before = r.rollups.report(start=NOW - 11 * DAY, end=NOW, level="tenant")
    assert [n.requests for n in before.nodes] == [27]

    assert prune_history(db, before=NOW - 5 * DAY, now=NOW, batch=10) == 25
    assert prune_history(db, before=NOW - 5 * DAY, now=NOW, batch=10) == 0

    with db.reader() as r:
        assert r.requests.count() == 2
        assert r.rollups.report(start=NOW - 11 * DAY, end=NOW, level="tenant") == before


def test_a_cut_younger_than_a_day_is_refused(db: Database) -> None:
    _rows(db, [NOW - 3600.0])
    for bad in ({"before": NOW - 3600.0}, {"before": NOW - 2 * DAY, "batch": 0}):
        with pytest.raises(ValueError):
            prune_history(db, now=NOW, **bad)  # type: ignore[arg-type]
    with db.reader() as r:
        assert r.requests.count() == 1
