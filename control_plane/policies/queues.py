"""An ordered queue of pending jobs, the building block of most policies."""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort
from collections.abc import Callable, Iterator

from sortedcontainers import SortedList

from control_plane.core.job import Job
from control_plane.core.policy import Refuses, refusals

Admit = Callable[[Job], bool]
SortKey = tuple[float, ...]
Entry = tuple[SortKey, float, int, str]
"""(policy key, arrival, seq, id): a total order, FCFS among equal keys."""


SMALL = 256
"""Up to this many entries a queue is a plain sorted list (cheaper than a `SortedList` for
the short queues most leaves hold); beyond it, and until it shrinks to a quarter of that, a
`SortedList`."""


def no_key(job: Job) -> SortKey:
    return ()


class DuplicateJobError(ValueError):
    """A job id was pushed while a job with that id is still pending."""


class JobQueue:
    """Jobs in ascending `(key(job), arrival, seq, id)` order, also kept apart per model.

    Keys are computed once, on `add`. Entries sit in a sorted list (`sortedcontainers` once
    longer than `SMALL`), so insert, delete and the head cost O(log n) whatever the backlog
    (a short plain list moves at most `SMALL` references). The per-model lists let a
    scan skip every job of a model its admit refuses without visiting them (`candidates`);
    they are built when a second model first queues (until then the queue is that list).
    """

    __slots__ = ("_by_model", "_entries", "_first", "_jobs", "_key", "_models", "_where")

    def __init__(self, key: Callable[[Job], SortKey] = no_key) -> None:
        self._key = key
        self._entries: list[Entry] | SortedList = []
        self._first: Entry | None = None
        """`_entries[0]` (None when empty), read without indexing the sorted list."""
        self._models: dict[str, int] = {}
        """Queued jobs per model."""
        self._by_model: dict[str, SortedList] | None = None
        """Each queued model's entries, once the queue has held two models at once."""
        self._jobs: dict[str, Job] = {}
        self._where: dict[str, Entry] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def __bool__(self) -> bool:
        return bool(self._entries)

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._jobs

    def __iter__(self) -> Iterator[Job]:
        return (self._jobs[entry[3]] for entry in self._entries)

    def entries(self) -> Iterator[tuple[Entry, Job]]:
        """`(entry, job)` pairs in queue order."""
        return ((entry, self._jobs[entry[3]]) for entry in self._entries)

    def add(self, job: Job) -> None:
        if job.id in self._jobs:
            raise DuplicateJobError(f"job {job.id!r} is already pending")
        entry: Entry = (self._key(job), job.arrival, job.seq, job.id)
        entries = self._entries
        if isinstance(entries, list):
            insort(entries, entry)
            if len(entries) > SMALL:
                self._entries = SortedList(entries)
        else:
            entries.add(entry)
        if self._first is None or entry < self._first:
            self._first = entry
        self._jobs[job.id] = job
        self._where[job.id] = entry
        models, model = self._models, job.model
        models[model] = models.get(model, 0) + 1
        by_model = self._by_model
        if by_model is not None:
            same_model = by_model.get(model)
            if same_model is None:
                same_model = by_model[model] = SortedList()
            same_model.add(entry)
        elif len(models) > 1:
            self._split()

    def _split(self) -> None:
        """Build the per-model lists from the queue (the first time two models queue)."""
        by_model: dict[str, list[Entry]] = {}
        for entry in self._entries:
            by_model.setdefault(self._jobs[entry[3]].model, []).append(entry)
        self._by_model = {model: SortedList(same) for model, same in by_model.items()}

    def remove(self, job_id: str) -> Job | None:
        job = self._jobs.pop(job_id, None)
        if job is None:
            return None
        entry = self._where.pop(job_id)
        entries = self._entries
        if isinstance(entries, list):
            del entries[bisect_left(entries, entry)]
        else:
            entries.remove(entry)
        if entry is self._first:
            self._first = entries[0] if entries else None
        self._forget(job, entry)
        return job

    def pop_head(self) -> Job:
        """Remove and return the head (the queue must not be empty)."""
        entries = self._entries
        entry = entries.pop(0)
        self._first = entries[0] if entries else None
        job_id = entry[3]
        del self._where[job_id]
        job = self._jobs.pop(job_id)
        self._forget(job, entry)
        return job

    def _forget(self, job: Job, entry: Entry) -> None:
        """The bookkeeping of a job that left `_entries`."""
        entries = self._entries
        if not isinstance(entries, list) and len(entries) < SMALL // 4:
            self._entries = list(entries)
        model = job.model
        left = self._models[model] - 1
        if left:
            self._models[model] = left
        else:
            del self._models[model]
        if self._by_model is not None:
            same_model = self._by_model[model]
            same_model.remove(entry)
            if not same_model:
                del self._by_model[model]

    def head(self) -> Job | None:
        first = self._first
        return None if first is None else self._jobs[first[3]]

    def head_entry(self) -> Entry | None:
        return self._first

    def candidates(self, refuses: Refuses | None = None) -> Iterator[tuple[Entry, Job]]:
        """`(entry, job)` in queue order, without the jobs of models that `refuses` names.

        `refuses` is asked as the scan goes (a model it starts refusing midway is skipped
        from then on); None skips nothing. Nothing may be added or removed meanwhile.
        """
        if refuses is None:
            return self.entries()
        if len(self._models) <= 1:
            return self._single_model(refuses)
        return self._merged(refuses)

    def _single_model(self, refuses: Refuses) -> Iterator[tuple[Entry, Job]]:
        for entry in self._entries:
            job = self._jobs[entry[3]]
            if refuses(job.model):
                return  # every job left is of that model
            yield entry, job

    def _merged(self, refuses: Refuses) -> Iterator[tuple[Entry, Job]]:
        """Merge the per-model lists, dropping a model's list once it is refused."""
        heads: list[tuple[Entry, str, Iterator[Entry]]] = []
        assert self._by_model is not None  # two models queue: the lists were built
        for model, same_model in self._by_model.items():
            if not refuses(model):
                entries = iter(same_model)
                heads.append((next(entries), model, entries))
        heapq.heapify(heads)
        while heads:
            entry, model, entries = heads[0]
            yield entry, self._jobs[entry[3]]
            following = next(entries, None)
            if following is None or refuses(model):
                heapq.heappop(heads)
            else:
                heapq.heapreplace(heads, (following, model, entries))

    def first(self, admit: Admit) -> Job | None:
        """The earliest job in queue order that `admit` accepts (not removed).

        Jobs of models that `admit` refuses outright (`policies.base.refusals`) are skipped
        unasked: they would have been refused, so the answer is the same.
        """
        for _, job in self.candidates(refusals(admit)):
            if admit(job):
                return job
        return None

    def pop_first(self, admit: Admit) -> Job | None:
        job = self.first(admit)
        if job is not None:
            self.remove(job.id)
        return job
