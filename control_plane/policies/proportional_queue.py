"""ExFairS proportional priority enqueueing, Algorithm 2 (docs/algorithms.md §4.3)."""

from __future__ import annotations

import bisect
import math
from collections import Counter, deque
from collections.abc import Callable, Iterator

from control_plane.core.job import Job
from control_plane.core.policy import Refuses, refusals


class ProportionalQueue:
    """A FIFO whose new entries jump forward in proportion to their relative priority.

    Smaller priority value = more urgent. A new request with priority `p` jumps
    `P_f = min(⌊N_o · (1 − r)⌋ · M, P_max, N_o, |Q|)` places from the tail, where `N_o` counts
    queued requests with a larger value and `r` is `p`'s rank among the distinct queued values.
    Dequeue takes the head (or the first admissible entry). Guarantees: an enqueue moves any
    queued request back by at most one place, and only requests among the last `P_max`; so,
    while dequeues take the head, a request with `P_max` requests behind it is never overtaken
    again and leaves within as many dequeues as there are requests ahead of it.
    """

    def __init__(self, multiplier: float = 1.0, p_max: int = 32) -> None:
        self.multiplier = multiplier
        self.p_max = p_max
        self._queue: deque[tuple[Job, int]] = deque()
        self._counts: Counter[int] = Counter()
        self._ids: set[str] = set()
        self._models: Counter[str] = Counter()
        """Queued jobs per model."""

    def __len__(self) -> int:
        return len(self._queue)

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._ids

    def __iter__(self) -> Iterator[tuple[Job, int]]:
        return iter(self._queue)

    def position_for(self, priority: int) -> int:
        """Where Algorithm 2 would insert a request of `priority` now."""
        size = len(self._queue)
        if not self._counts:
            return size
        distinct = sorted(self._counts)
        more_urgent = bisect.bisect_left(distinct, priority)
        total = len(distinct) + (0 if priority in self._counts else 1)
        rank = more_urgent / total
        overtakable = sum(n for p, n in self._counts.items() if p > priority)
        jump = 0
        if overtakable > 0:
            base = math.floor(overtakable * (1.0 - rank))
            jump = min(math.floor(base * self.multiplier), self.p_max, overtakable, size)
        return max(0, size - jump)

    def insert(self, job: Job, priority: int) -> int:
        """Enqueue by Algorithm 2; returns the position taken."""
        position = self.position_for(priority)
        self.insert_at(job, priority, position)
        return position

    def insert_at(self, job: Job, priority: int, position: int) -> None:
        self._queue.insert(position, (job, priority))
        self._counts[priority] += 1
        self._models[job.model] += 1
        self._ids.add(job.id)

    def pop_first(self, admit: Callable[[Job], bool]) -> Job | None:
        """Remove and return the first job `admit` accepts (None when none does).

        When `admit` tells which models it refuses outright (`policies.base.refusals`), those
        jobs are passed over unasked and the scan ends once every queued model is refused.
        """
        refuses = refusals(admit)
        if refuses is None:
            return self._pop_first(admit, None, set())
        refused = {model for model in self._models if refuses(model)}
        if len(refused) == len(self._models):
            return None
        return self._pop_first(admit, refuses, refused)

    def _pop_first(
        self, admit: Callable[[Job], bool], refuses: Refuses | None, refused: set[str]
    ) -> Job | None:
        for index, (job, _) in enumerate(self._queue):
            if job.model in refused:
                continue
            if admit(job):
                self._delete(index)
                return job
            if refuses is not None and refuses(job.model):
                refused.add(job.model)
                if len(refused) == len(self._models):
                    return None
        return None

    def remove(self, job_id: str) -> Job | None:
        if job_id not in self._ids:
            return None
        for index, (job, _) in enumerate(self._queue):
            if job.id == job_id:
                self._delete(index)
                return job
        raise AssertionError("queue index out of sync")  # pragma: no cover

    def _delete(self, index: int) -> None:
        job, priority = self._queue[index]
        del self._queue[index]
        self._counts[priority] -= 1
        if self._counts[priority] == 0:
            del self._counts[priority]
        self._models[job.model] -= 1
        if self._models[job.model] == 0:
            del self._models[job.model]
        self._ids.discard(job.id)
