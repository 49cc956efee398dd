"""Least-loaded placement."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from control_plane.core.job import Job
from control_plane.core.placement import Placement
from control_plane.core.worker_view import WorkerView


class LeastLoadedPlacement(Placement):
    """Fewest in-flight requests relative to `max_num_seqs`; ties by KV usage, then id.

    Guarantee: with equal workers, in-flight counts never differ by more than one.
    """

    name: ClassVar[str] = "least_loaded"

    def choose(self, job: Job, workers: Sequence[WorkerView], now: float) -> WorkerView:
        return min(workers, key=lambda w: (w.load(), w.kv_usage, w.id))
