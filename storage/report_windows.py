"""Time arithmetic of reports: whole-minute ranges, the series step, and covering a range
with the fewest aligned rollup windows (days inside, hours at the edges, minutes at the rims).
"""

from __future__ import annotations

import math
from typing import Final

from storage.errors import InvalidValueError
from storage.rollup_stats import WINDOWS

MINUTE: Final = 60
HOUR: Final = 3600
DAY: Final = 86400

Piece = tuple[int, int, int]
"""(window_s, lo, hi): the rollup rows of resolution window_s with lo ≤ bucket < hi."""


def minute_range(start: float, end: float) -> tuple[int, int]:
    """[start, end) widened to whole minutes; raises InvalidValueError when empty."""
    if not end > start:
        raise InvalidValueError(f"empty report range [{start}, {end})")
    return math.floor(start / MINUTE) * MINUTE, math.ceil(end / MINUTE) * MINUTE


def auto_step(start: int, end: int) -> int:
    """The series step: days for ranges of 3 days or more, hours from 3 hours, else minutes."""
    span = end - start
    if span >= 3 * DAY:
        return DAY
    if span >= 3 * HOUR:
        return HOUR
    return MINUTE


MAX_POINTS: Final = 20_000
"""The most windows a report's series may have: two weeks of minutes, two years of hours, half
a century of days. Beyond it one request would build millions of points on a shared worker
thread."""


def check_step(step: int, start: int, end: int) -> int:
    """A series step must be one of the rollup resolutions and give at most `MAX_POINTS`
    windows over whole-minute [start, end)."""
    if step not in WINDOWS:
        raise InvalidValueError(f"step must be one of {WINDOWS} seconds, got {step}")
    points = math.ceil(end / step) - math.floor(start / step)
    if points > MAX_POINTS:
        raise InvalidValueError(
            f"a {step} s step over this period gives {points} windows, more than {MAX_POINTS}: "
            "shorten the period or take a larger step"
        )
    return step


def cover(start: int, end: int, largest: int) -> list[Piece]:
    """Aligned pieces exactly covering whole-minute [start, end), none coarser than `largest`.

    Every window size divides `largest`, so each rollup row of a piece lies inside one
    `largest`-aligned window and a series at that step can be summed row by row.
    """
    windows = [w for w in sorted(WINDOWS, reverse=True) if w <= largest]
    return _cover(start, end, windows)


def _cover(start: int, end: int, windows: list[int]) -> list[Piece]:
    if start >= end:
        return []
    window, finer = windows[0], windows[1:]
    if not finer:
        return [(window, start, end)]
    lo = math.ceil(start / window) * window
    hi = math.floor(end / window) * window
    if lo >= hi:
        return _cover(start, end, finer)
    return [*_cover(start, lo, finer), (window, lo, hi), *_cover(hi, end, finer)]
