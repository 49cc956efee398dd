"""How long the request history is kept: `prune_history` deletes the oldest request rows.

Rule: rows that arrived before the cut are deleted in batches of `batch`, each its own
transaction (a writer waits for one batch at most); the per-minute, hour and day rollups are
kept, so the reports over the pruned range keep their totals and percentiles, while what reads
the rows themselves (exact reports, the Workflows pages' history) no longer sees them. The cut
must lie at least `MIN_AGE_S` in the past: the recorder inserts rows idempotently by id, and a
completion redelivered after its row was pruned would be inserted and rolled up a second time
— redelivery happens within minutes, never a day later.
Guarantee: every row that arrived before the cut when the call started is gone when it
returns (rows recorded later with an older arrival are deleted by the next run).
"""

from __future__ import annotations

from storage.db import Database
from storage.write_guard import classified

MIN_AGE_S = 86_400.0
"""The youngest cut allowed: a day."""
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
