"""Pruning the request history: the oldest rows go in batches, the rollups (and so the
reports' totals) stay, and a cut younger than a day is refused. Pruning the minute rollups:
only minute rows before the cut aligned down to the hour go, in batches, after the horizon
was recorded; a cut younger than two days is refused."""

from __future__ import annotations

import dataclasses

import pytest
from sqlalchemy import select

from storage.db import Database
from storage.models import FairnessRollup
from storage.retention import prune_history, prune_minute_rollups
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


def _rollup_rows(db: Database) -> list[tuple[int, int]]:
    """(window_s, bucket) of every rollup row, sorted."""
    c = FairnessRollup
    with db.reader() as r:
        rows = r.session.execute(select(c.window_s, c.bucket).order_by(c.window_s, c.bucket))
        return [(int(w), int(b)) for w, b in rows]


def test_minute_rollups_before_the_aligned_cut_go_in_batches(db: Database) -> None:
    before = NOW - 5 * DAY - 2600.0  # 16:40 past an hour: the cut is that hour
    cut = before - 1000.0
    assert cut % 3600 == 0
    arrivals = [NOW - 10 * DAY + 60.0 * i for i in range(5)]  # 5 old minutes
    arrivals += [cut - 30.0, cut + 10.0, before + 10.0, NOW - 60.0]
    _rows(db, arrivals)
    rows = _rollup_rows(db)
    with db.reader() as r:
        assert r.rollups.minute_horizon() is None

    assert prune_minute_rollups(db, before=before, now=NOW, batch=4) == (cut, 6 * 3)
    left = _rollup_rows(db)
    assert left == [(w, b) for w, b in rows if w != 60 or b >= cut]
    assert [b for w, b in left if w == 60] == sorted(b for w, b in rows if w == 60 and b >= cut)
    assert sum(1 for w, _ in left if w == 60) == 3 * 3  # cut + 10 s, before + 10 s, NOW - 60 s
    with db.reader() as r:
        assert r.rollups.minute_horizon() == cut
        assert r.requests.count() == len(arrivals)  # the request rows are another option

    assert prune_minute_rollups(db, before=before - 3 * DAY, now=NOW) == (cut - 3 * DAY, 0)
    with db.reader() as r:
        assert r.rollups.minute_horizon() == cut  # never moves back


def test_a_minute_rollup_cut_younger_than_two_days_is_refused(db: Database) -> None:
    _rows(db, [NOW - 3 * DAY])
    rows = _rollup_rows(db)
    for bad in (
        {"before": NOW - 2 * DAY + 1.0},
        {"before": float("nan")},
        {"before": NOW - 4 * DAY, "batch": 0},
    ):
        with pytest.raises(ValueError):
            prune_minute_rollups(db, now=NOW, **bad)  # type: ignore[arg-type]
    assert _rollup_rows(db) == rows
    with db.reader() as r:
        assert r.rollups.minute_horizon() is None
