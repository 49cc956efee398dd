"""Time arithmetic of reports: whole-minute ranges, the series step, and covering a range
with the fewest aligned rollup windows (days inside, hours at the edges, minutes at the rims).

Minute rows older than the minute horizon may be pruned (`storage/retention.py`); the horizon
is hour-aligned, so before it a range's edges are widened to the hour (`past_horizon`) and the
series takes no step finer than an hour (`series_step`): the cover then reads hour and day rows
only there, and stays an exact partition of the (widened) range.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
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


def past_horizon(lo: int, hi: int, horizon: int | None) -> tuple[int, int]:
    """Whole-minute [lo, hi) with each edge that lies before the minute `horizon` (hour-aligned;
    None: no minute row was pruned) widened to the hour, since only hour rows remain there."""
    if horizon is None:
        return lo, hi
    if lo < horizon:
        lo = math.floor(lo / HOUR) * HOUR
    if hi < horizon:
        hi = math.ceil(hi / HOUR) * HOUR  # still ≤ horizon: the horizon is on an hour
    return lo, hi


def moment(epoch: int) -> str:
    """`epoch` as ISO 8601 UTC (for messages)."""
    return datetime.fromtimestamp(epoch, UTC).isoformat().replace("+00:00", "Z")


def series_step(step: int | None, lo: int, hi: int, horizon: int | None) -> int:
    """The series step of [lo, hi): `step`, or by span (`auto_step`) when None.

    A range starting before the minute `horizon` has no minute rows there, and empty minutes
    would read as no traffic: an automatic step is then at least an hour, and an explicit finer
    step is refused (InvalidValueError naming the horizon). `check_step` checks the rest."""
    pruned = horizon is not None and lo < horizon
    if step is None:
        chosen = auto_step(lo, hi)
        return max(chosen, HOUR) if pruned else chosen
    if pruned and step in WINDOWS and step < HOUR:
        when = moment(horizon or 0)
        raise InvalidValueError(
            f"minute rollups before {when} were pruned: a {step} s step cannot show the minutes "
            f"there; take a {HOUR} s step or start at {when} or later"
        )
    return step


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
