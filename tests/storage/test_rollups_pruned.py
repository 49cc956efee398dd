"""Reports after the minute rollups were pruned: an edge before the horizon is widened to the
hour and the report equals the one computed before pruning over that widened range; a report
after the horizon is unchanged; a minute series is never shown over pruned minutes; a reader
open meanwhile keeps its snapshot; migration 0009 (the horizon's table) downgrades and
upgrades again."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest
from sqlalchemy import inspect

from storage.db import Database
from storage.engine import create_engine_for
from storage.errors import InvalidValueError
from storage.migrate import migrate
from storage.records import Level
from storage.report_windows import HOUR
from storage.reports import Report
from storage.retention import prune_minute_rollups
from tests.storage.test_rollups import DAY, T0, _load, _requests, assert_reports_agree

BEFORE = T0 + 2 * DAY + 1234.5  # the operator's cut, off the hour
CUT = math.floor(BEFORE / HOUR) * HOUR
NOW = T0 + 30 * DAY

RAGGED = [  # (start, end) with at least one edge before the horizon, off the hour
    (T0 + 0.7 * DAY + 1000.5, T0 + 2 * DAY - 77.0),  # both edges in the pruned period
    (T0 + DAY + 555.0, T0 + 3 * DAY + 999.0),  # starts in it, ends after the horizon
    (CUT - 5 * HOUR + 100.0, CUT - 5 * HOUR + 700.0),  # ten minutes in it
]
AFTER = [(CUT + 61.5, T0 + 4 * DAY + 33.0), (CUT, CUT + 50 * 60 + 1.0)]


def _widened(start: float, end: float) -> tuple[int, int]:
    lo, hi = math.floor(start / 60) * 60, math.ceil(end / 60) * 60
    if lo < CUT:
        lo = lo // HOUR * HOUR
    if hi < CUT:
        hi = math.ceil(hi / HOUR) * HOUR
    return lo, hi


def _reports(db: Database, ranges: Sequence[tuple[float, float]], level: Level) -> list[Report]:
    with db.reader() as r:
        return [r.rollups.report(start=a, end=b, level=level, step=HOUR) for a, b in ranges]


@pytest.fixture
def loaded(db: Database) -> Database:
    _load(db, _requests(3000))
    return db


@pytest.mark.parametrize("level", ["tenant", "agent"])
def test_ragged_edges_before_the_horizon_widen_to_the_hour(loaded: Database, level: Level) -> None:
    widened = [_widened(a, b) for a, b in RAGGED]
    expected = _reports(loaded, widened, level)  # computed while every minute row was there
    after_before = _reports(loaded, AFTER, level)
    assert prune_minute_rollups(loaded, before=BEFORE, now=NOW, batch=500)[1] > 0

    for got, want, (lo, hi) in zip(_reports(loaded, RAGGED, level), expected, widened, strict=True):
        assert (got.start, got.end) == (lo, hi)  # the span says the widened range
        assert sum(n.requests for n in got.nodes) > 0
        assert_reports_agree(got, want)  # totals, percentiles and the hourly series
    assert _reports(loaded, AFTER, level) == after_before  # after the horizon: unchanged
    with loaded.reader() as r:  # and equal to the exact report over the widened range
        for lo, hi in widened:
            fast = r.rollups.report(start=lo, end=hi, level=level, step=HOUR)
            exact = r.rollups.report_from_requests(start=lo, end=hi, level=level, step=HOUR)
            assert_reports_agree(fast, exact)


def test_a_minute_series_is_never_shown_over_pruned_minutes(loaded: Database) -> None:
    start, end = RAGGED[2]
    with loaded.reader() as r:
        minutes = r.rollups.report(start=start, end=end, level="tenant")
    assert minutes.step == 60 and len(minutes.series) == 11
    prune_minute_rollups(loaded, before=BEFORE, now=NOW)

    with loaded.reader() as r:
        auto = r.rollups.report(start=start, end=end, level="tenant")
        assert (auto.start, auto.end, auto.step) == (CUT - 5 * HOUR, CUT - 4 * HOUR, HOUR)
        assert len(auto.series) == 1
        with pytest.raises(InvalidValueError, match=r"minute rollups before .* were pruned"):
            r.rollups.report(start=start, end=end, level="tenant", step=60)
        with pytest.raises(InvalidValueError, match="were pruned"):
            r.rollups.minute_series(start=start, end=end, level="tenant")
        late = r.rollups.report(start=CUT + 120.0, end=CUT + 900.0, level="tenant")
        assert late.step == 60 and late.start == CUT + 120
        assert r.rollups.minute_series(start=CUT, end=CUT + 3600.0, level="tenant") != []


def test_a_report_open_while_pruning_reads_one_consistent_snapshot(loaded: Database) -> None:
    """The horizon is committed before any row goes, and a report reads both in one snapshot:
    a reader that began before the pruning still sees every minute row (and no horizon)."""
    start, end = RAGGED[0]
    with loaded.reader() as r:
        first = r.rollups.report(start=start, end=end, level="agent", step=HOUR)
        prune_minute_rollups(loaded, before=BEFORE, now=NOW)
        assert r.rollups.minute_horizon() is None
        assert r.rollups.report(start=start, end=end, level="agent", step=HOUR) == first
    with loaded.reader() as r:
        assert r.rollups.report(start=start, end=end, level="agent", step=HOUR).start < first.start


def test_migration_0009_downgrades_and_upgrades_with_a_horizon(db_url: str) -> None:
    migrate(db_url)
    db = Database(db_url)
    try:
        prune_minute_rollups(db, before=BEFORE, now=NOW)
        migrate(db_url, revision="0008")
        assert "rollup_horizons" not in _tables(db_url)
        migrate(db_url)
        assert "rollup_horizons" in _tables(db_url)
        with db.reader() as r:
            assert r.rollups.minute_horizon() is None
    finally:
        db.dispose()


def _tables(url: str) -> set[str]:
    engine = create_engine_for(url)
    try:
        with engine.connect() as conn:
            return set(inspect(conn).get_table_names())
    finally:
        engine.dispose()
