"""Covering a report range with aligned rollup windows."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from storage.errors import InvalidValueError
from storage.report_windows import DAY, HOUR, MINUTE, auto_step, cover, minute_range

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
