"""How long the request history is kept: `prune_history` deletes the oldest request rows,
`prune_minute_rollups` the oldest per-minute rollups.

Rule: rows that arrived before the cut are deleted in batches of `batch`, each its own
transaction (a writer waits for one batch at most); the per-minute, hour and day rollups are
kept, so the reports over the pruned range keep their totals and percentiles, while what reads
the rows themselves (exact reports, the Workflows pages' history) no longer sees them. The cut
must lie at least `MIN_AGE_S` in the past: the recorder inserts rows idempotently by id, and a
completion redelivered after its row was pruned would be inserted and rolled up a second time
— redelivery happens within minutes, never a day later.
Guarantee: every row that arrived before the cut when the call started is gone when it
returns (rows recorded later with an older arrival are deleted by the next run).

Minute rollups: the cut is aligned down to an hour and first recorded as the minute horizon
(its own transaction, never moved back); only then are the minute rows before it deleted, in
batches, each its own transaction. Hour and day rows stay, and reports read them before the
horizon (`RollupRepo.report`: edges there widened to the hour, no series step under an hour),
so every report stays an exact partition of the range it says it covers. The cut must lie at
least `MIN_MINUTE_AGE_S` in the past: the Live page reads minute rows up to a day back. A minute
row the recorder adds later before the horizon is never read, and goes with the next run.
"""

from __future__ import annotations

import math

from storage.db import Database
from storage.report_windows import HOUR, MINUTE
from storage.write_guard import classified

MIN_AGE_S = 86_400.0
"""The youngest cut allowed: a day."""
MIN_MINUTE_AGE_S = 2 * 86_400.0
"""The youngest minute-rollup cut allowed: two days (the Live page reads a day of minutes)."""
BATCH = 10_000


def prune_history(db: Database, *, before: float, now: float, batch: int = BATCH) -> int:
    """Delete every request row that arrived before `before`; → how many (`ValueError` when
    `before` is less than `MIN_AGE_S` before `now`, or `batch` is not positive)."""
    if before > now - MIN_AGE_S:
        raise ValueError("the cut must be at least a day in the past")
    if batch <= 0:
        raise ValueError("batch must be positive")
    deleted = 0
    while True:
        with classified(), db.repos() as repos:
            n = repos.requests.prune_before(before=before, limit=batch)
        deleted += n
        if n < batch:
            return deleted


def prune_minute_rollups(
    db: Database, *, before: float, now: float, batch: int = BATCH
) -> tuple[int, int]:
    """Delete every minute rollup row before `before` aligned down to an hour, after recording
    that hour as the minute horizon; → (the cut, rows deleted). `ValueError` when `before` is
    less than `MIN_MINUTE_AGE_S` before `now`, or `batch` is not positive."""
    if not before <= now - MIN_MINUTE_AGE_S:
        raise ValueError("the minute-rollup cut must be at least two days in the past")
    if batch <= 0:
        raise ValueError("batch must be positive")
    cut = math.floor(before / HOUR) * HOUR
    with classified(), db.repos() as repos:
        repos.rollups.raise_minute_horizon(cut)  # committed before any row goes
    deleted = 0
    while True:
        with classified(), db.repos() as repos:
            n = repos.rollups.prune(window_s=MINUTE, before=cut, limit=batch)
        deleted += n
        if n < batch:
            return cut, deleted
