"""ExFairS proportional priority enqueueing, Algorithm 2 (docs/algorithms.md §4.3)."""

from __future__ import annotations

import bisect
import heapq
import math
from collections import Counter, deque
from collections.abc import Callable, Iterator

from control_plane.core.job import Job
from control_plane.core.policy import Refuses, refusals

GAP = 1 << 32
"""Spacing of fresh order labels: a place between two entries takes the middle label."""


class _Entry:
    """One queued job; `alive` turns False when it leaves from the middle of the queue.
    `label` grows along the queue (the order of entries of different models)."""

    __slots__ = ("alive", "job", "label", "priority")

    def __init__(self, job: Job, priority: int) -> None:
        self.job = job
        self.priority = priority
        self.label = 0
        self.alive = True


class ProportionalQueue:
    """A FIFO whose new entries jump forward in proportion to their relative priority.

    Smaller priority value = more urgent. A new request with priority `p` jumps
    `P_f = min(⌊N_o · (1 − r)⌋ · M, P_max, N_o, |Q|)` places from the tail, where `N_o` counts
    queued requests with a larger value and `r` is `p`'s rank among the distinct queued values.
    Dequeue takes the head (or the first admissible entry). Guarantees: an enqueue moves any
    queued request back by at most one place, and only requests among the last `P_max`; so,
    while dequeues take the head, a request with `P_max` requests behind it is never overtaken
    again and leaves within as many dequeues as there are requests ahead of it.
    Cost: an enqueue walks at most `P_max` places from the tail and reads the distinct queued
    priorities (at most `2 · credit_bound + 1` under ExFairS); a dequeue from the head and a
    withdrawal are O(1): a job leaving from the middle is marked and skipped, and the marks
    are swept when they outnumber the queued jobs. Once two models queue together, each
    model's entries are also kept in queue order, so a dequeue that skips the models `admit`
    refuses merges the others' entries (by `label`) instead of walking past the refused ones.
    """

    def __init__(self, multiplier: float = 1.0, p_max: int = 32, sweep_slack: int = 64) -> None:
        self.multiplier = multiplier
        self.p_max = p_max
        self._sweep_slack = sweep_slack
        self._queue: deque[_Entry] = deque()
        self._entry: dict[str, _Entry] = {}
        self._dead = 0
        """Entries in `_queue` whose job has left."""
        self._counts: Counter[int] = Counter()
        self._models: Counter[str] = Counter()
        """Queued jobs per model."""
        self._by_model: dict[str, deque[_Entry]] | None = None
        """Each queued model's entries in queue order (a left-over left part may have left),
        and every entry labelled, from the first time two models queue together."""

    def __len__(self) -> int:
        return len(self._entry)

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._entry

    def __iter__(self) -> Iterator[tuple[Job, int]]:
        return ((e.job, e.priority) for e in self._queue if e.alive)

    def position_for(self, priority: int) -> int:
        """Where Algorithm 2 would insert a request of `priority` now (among queued jobs)."""
        size = len(self._entry)
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
        """Enqueue at `position` among the queued jobs (0 = head, `len` = tail)."""
        slot = self._slot(position)
        entry = _Entry(job, priority)
        by_model = self._by_model
        if by_model is not None:
            entry.label = self._label(slot)
        self._queue.insert(slot, entry)
        self._entry[job.id] = entry
        self._counts[priority] += 1
        self._models[job.model] += 1
        if by_model is None:
            if len(self._models) > 1:
                self._split()
            return
        same = by_model.get(job.model)
        if same is None:
            same = by_model[job.model] = deque()
        at = len(same)
        while at > 0 and same[at - 1].label > entry.label:  # at most the jump
            at -= 1
        same.insert(at, entry)

    def _split(self) -> None:
        """Label every entry and build the per-model queues (two models queue now)."""
        by_model: dict[str, deque[_Entry]] = {}
        for i, entry in enumerate(self._queue):
            entry.label = i * GAP
            if entry.alive:
                by_model.setdefault(entry.job.model, deque()).append(entry)
        self._by_model = by_model

    def _label(self, slot: int) -> int:
        """An order label for a new entry at deque index `slot` (relabels all when full)."""
        queue = self._queue
        if slot == len(queue):
            return queue[-1].label + GAP if queue else 0
        if slot == 0:
            return queue[0].label - GAP
        low, high = queue[slot - 1].label, queue[slot].label
        if high - low < 2:
            for i, e in enumerate(queue):
                e.label = i * GAP
            low, high = queue[slot - 1].label, queue[slot].label
        return (low + high) // 2

    def _slot(self, position: int) -> int:
        """The deque index before which a job lands `position` places from the head: counted
        from the tail, over live entries only, so it costs the jump, not the queue."""
        behind = len(self._entry) - position
        slot = len(self._queue)
        while behind > 0:
            slot -= 1
            if self._queue[slot].alive:
                behind -= 1
        return slot

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
        if len(self._models) > 1:
            return self._pop_merged(admit, refuses, refused)
        return self._pop_first(admit, refuses, refused)

    def _pop_merged(
        self, admit: Callable[[Job], bool], refuses: Refuses, refused: set[str]
    ) -> Job | None:
        """`_pop_first` over the entries of the models not refused, merged in queue order: the
        same jobs asked in the same order, the refused models' entries never visited."""
        heads: list[tuple[int, _Entry, Iterator[_Entry]]] = []
        assert self._by_model is not None  # two models queue: the queues were built
        for model, same in self._by_model.items():
            if model not in refused:
                walk = iter(same)
                entry = _next_alive(walk)
                if entry is not None:
                    heads.append((entry.label, entry, walk))
        heapq.heapify(heads)
        while heads:
            _, entry, walk = heads[0]
            job = entry.job
            if admit(job):
                self._leave(entry)
                return job
            if refuses(job.model):
                refused.add(job.model)
                if len(refused) == len(self._models):
                    return None
                heapq.heappop(heads)
                continue
            entry = _next_alive(walk)
            if entry is None:
                heapq.heappop(heads)
            else:
                heapq.heapreplace(heads, (entry.label, entry, walk))
        return None

    def _pop_first(
        self, admit: Callable[[Job], bool], refuses: Refuses | None, refused: set[str]
    ) -> Job | None:
        for entry in self._queue:
            if not entry.alive:
                continue
            job = entry.job
            if job.model in refused:
                continue
            if admit(job):
                self._leave(entry)
                return job
            if refuses is not None and refuses(job.model):
                refused.add(job.model)
                if len(refused) == len(self._models):
                    return None
        return None

    def remove(self, job_id: str) -> Job | None:
        entry = self._entry.get(job_id)
        if entry is None:
            return None
        self._leave(entry)
        return entry.job

    def _leave(self, entry: _Entry) -> None:
        entry.alive = False
        self._dead += 1
        del self._entry[entry.job.id]
        self._counts[entry.priority] -= 1
        if self._counts[entry.priority] == 0:
            del self._counts[entry.priority]
        model = entry.job.model
        self._models[model] -= 1
        by_model = self._by_model
        if self._models[model] == 0:
            del self._models[model]
            if by_model is not None:
                del by_model[model]  # every entry left
        elif by_model is not None:
            same = by_model[model]
            while not same[0].alive:
                same.popleft()
        queue = self._queue
        while queue and not queue[0].alive:  # the usual case: the head left
            queue.popleft()
            self._dead -= 1
        if self._dead > len(self._entry) + self._sweep_slack:
            self._queue = deque(e for e in queue if e.alive)
            self._dead = 0
            if by_model is not None:
                for key, same in by_model.items():
                    by_model[key] = deque(e for e in same if e.alive)


def _next_alive(walk: Iterator[_Entry]) -> _Entry | None:
    for entry in walk:
        if entry.alive:
            return entry
    return None
