"""Covering a report range with aligned rollup windows; before the minute horizon, whole
hours only (no minute piece, no series step under an hour)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from storage.errors import InvalidValueError
from storage.report_windows import (
    DAY,
    HOUR,
    MINUTE,
    auto_step,
    cover,
    minute_range,
    past_horizon,
    series_step,
)

minutes = st.integers(min_value=0, max_value=60 * 24 * 40)


@given(minutes, minutes, st.sampled_from([MINUTE, HOUR, DAY]))
def test_cover_is_an_exact_disjoint_aligned_partition(a: int, b: int, largest: int) -> None:
    start, end = sorted((a * MINUTE, b * MINUTE))
    pieces = cover(start, end, largest)
    covered: list[tuple[int, int]] = []
    for window, lo, hi in pieces:
        assert window <= largest
        assert lo % window == 0 and hi % window == 0 and lo < hi
        assert largest % window == 0  # each row of a piece lies in one series window
        covered.append((lo, hi))
    covered.sort()
    if start == end:
        assert covered == []
        return
    assert covered[0][0] == start and covered[-1][1] == end
    assert all(prev[1] == nxt[0] for prev, nxt in itertools.pairwise(covered))


def test_cover_uses_few_pieces_for_a_month() -> None:
    start = 3 * DAY + 17 * HOUR + 13 * MINUTE
    pieces = cover(start, start + 30 * DAY, DAY)
    assert len(pieces) <= 5
    assert sum(1 for w, _, _ in pieces if w == DAY) == 1


def test_minute_range_and_auto_step() -> None:
    assert minute_range(61.5, 119.0) == (60, 120)
    assert minute_range(60.0, 120.0) == (60, 120)
    with pytest.raises(InvalidValueError):
        minute_range(120.0, 120.0)
    assert auto_step(0, 30 * DAY) == DAY
    assert auto_step(0, 5 * HOUR) == HOUR
    assert auto_step(0, 2 * HOUR) == MINUTE


@given(minutes, minutes, st.integers(min_value=0, max_value=24 * 40), st.sampled_from([HOUR, DAY]))
def test_before_the_horizon_a_cover_reads_no_minute_row(
    a: int, b: int, hours: int, largest: int
) -> None:
    start, end = sorted((a * MINUTE, b * MINUTE))
    horizon = hours * HOUR
    lo, hi = past_horizon(start, end, horizon)
    assert lo <= start and hi >= end and hi - end < HOUR and start - lo < HOUR
    if start >= horizon:
        assert (lo, hi) == (start, end)
    for window, p_lo, _ in cover(lo, hi, largest):
        assert window > MINUTE or p_lo >= horizon


def test_past_horizon_and_series_step() -> None:
    horizon = 10 * HOUR
    assert past_horizon(3 * HOUR + 60, 4 * HOUR + 120, None) == (3 * HOUR + 60, 4 * HOUR + 120)
    assert past_horizon(3 * HOUR + 60, 4 * HOUR + 120, horizon) == (3 * HOUR, 5 * HOUR)
    assert past_horizon(9 * HOUR + 60, 11 * HOUR + 120, horizon) == (9 * HOUR, 11 * HOUR + 120)
    assert past_horizon(horizon, horizon + 60, horizon) == (horizon, horizon + 60)
    assert series_step(None, 3 * HOUR, 4 * HOUR, None) == MINUTE
    assert series_step(None, 3 * HOUR, 4 * HOUR, horizon) == HOUR
    assert series_step(None, 0, 30 * DAY, horizon) == DAY
    assert series_step(None, horizon, horizon + HOUR, horizon) == MINUTE
    assert series_step(MINUTE, horizon, horizon + HOUR, horizon) == MINUTE
    assert series_step(HOUR, 3 * HOUR, 4 * HOUR, horizon) == HOUR
    with pytest.raises(InvalidValueError, match="before 1970-01-01T10:00:00Z were pruned"):
        series_step(MINUTE, 3 * HOUR, 4 * HOUR, horizon)
