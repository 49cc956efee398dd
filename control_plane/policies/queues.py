"""An ordered queue of pending jobs, the building block of most policies."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator

from sortedcontainers import SortedList

from control_plane.core.job import Job
from control_plane.core.policy import Refuses, refusals

Admit = Callable[[Job], bool]
SortKey = tuple[float, ...]
Entry = tuple[SortKey, float, int, str]
"""(policy key, arrival, seq, id): a total order, FCFS among equal keys."""


def no_key(job: Job) -> SortKey:
    return ()


class DuplicateJobError(ValueError):
    """A job id was pushed while a job with that id is still pending."""


class JobQueue:
    """Jobs in ascending `(key(job), arrival, seq, id)` order, also kept apart per model.

    Keys are computed once, on `add`. Entries sit in sorted lists (`sortedcontainers`), so
    insert, delete and the head cost O(log n) whatever the backlog. The per-model lists let a
    scan skip every job of a model its admit refuses without visiting them (`candidates`).
    """

    __slots__ = ("_by_model", "_entries", "_jobs", "_key", "_where")

    def __init__(self, key: Callable[[Job], SortKey] = no_key) -> None:
        self._key = key
        self._entries: SortedList = SortedList()
        self._by_model: dict[str, SortedList] = {}
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
        self._entries.add(entry)
        same_model = self._by_model.get(job.model)
        if same_model is None:
            same_model = self._by_model[job.model] = SortedList()
        same_model.add(entry)
        self._jobs[job.id] = job
        self._where[job.id] = entry

    def remove(self, job_id: str) -> Job | None:
        job = self._jobs.pop(job_id, None)
        if job is None:
            return None
        entry = self._where.pop(job_id)
        self._entries.remove(entry)
        same_model = self._by_model[job.model]
        same_model.remove(entry)
        if not same_model:
            del self._by_model[job.model]
        return job

    def head(self) -> Job | None:
        return self._jobs[self._entries[0][3]] if self._entries else None

    def head_entry(self) -> Entry | None:
        return self._entries[0] if self._entries else None

    def candidates(self, refuses: Refuses | None = None) -> Iterator[tuple[Entry, Job]]:
        """`(entry, job)` in queue order, without the jobs of models that `refuses` names.

        `refuses` is asked as the scan goes (a model it starts refusing midway is skipped
        from then on); None skips nothing. Nothing may be added or removed meanwhile.
        """
        if refuses is None:
            return self.entries()
        if len(self._by_model) == 1:
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
