"""How many requests a worker held at once, from the recorder's rows (no over-commit checks).

A row's `[dispatched_at, finished_at]` is the gateway's view of one request on `worker`: it
starts after the grant (the scheduler already counted the request there) and ends before the
`complete` event (the scheduler still counts it), so it lies inside the scheduler's own
accounting. The most rows overlapping on a worker therefore never exceed the scheduler's most
in-flight requests there: above the worker's `max_num_seqs`, the control plane over-committed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from storage.records import RequestRecord


def peak_per_worker(rows: Iterable[RequestRecord]) -> dict[str, int]:
    """Worker → the most of its rows' dispatch-to-finish intervals that overlap at once."""
    edges: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for row in rows:
        if row.worker and row.dispatched_at is not None and row.finished_at is not None:
            edges[row.worker] += [(row.dispatched_at, 1), (row.finished_at, -1)]
    peaks: dict[str, int] = {}
    for worker, marks in edges.items():
        now = peak = 0
        for _, step in sorted(marks):  # at equal times an end (-1) sorts before a start
            now += step
            peak = max(peak, now)
        peaks[worker] = peak
    return peaks
