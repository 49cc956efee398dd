"""An ordered queue of pending jobs, the building block of most policies."""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator

from control_plane.policies.job import Job

Admit = Callable[[Job], bool]
SortKey = tuple[float, ...]
Entry = tuple[SortKey, float, int, str]
"""(policy key, arrival, seq, id): a total order, FCFS among equal keys."""


def no_key(job: Job) -> SortKey:
    return ()


class DuplicateJobError(ValueError):
    """A job id was pushed while a job with that id is still pending."""


class JobQueue:
    """Jobs in ascending `(key(job), arrival, seq, id)` order.

    Keys are computed once, on `add`. Insert and delete cost a binary search plus a memmove,
    which stays far below a microsecond per thousand queued jobs.
    """

    __slots__ = ("_entries", "_jobs", "_key", "_where")

    def __init__(self, key: Callable[[Job], SortKey] = no_key) -> None:
        self._key = key
        self._entries: list[Entry] = []
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
        bisect.insort(self._entries, entry)
        self._jobs[job.id] = job
        self._where[job.id] = entry

    def remove(self, job_id: str) -> Job | None:
        job = self._jobs.pop(job_id, None)
        if job is None:
            return None
        entry = self._where.pop(job_id)
        index = bisect.bisect_left(self._entries, entry)
        del self._entries[index]
        return job

    def head(self) -> Job | None:
        return self._jobs[self._entries[0][3]] if self._entries else None

    def head_entry(self) -> Entry | None:
        return self._entries[0] if self._entries else None

    def first(self, admit: Admit) -> Job | None:
        """The earliest job in queue order that `admit` accepts (not removed)."""
        for entry in self._entries:
            job = self._jobs[entry[3]]
            if admit(job):
                return job
        return None

    def pop_first(self, admit: Admit) -> Job | None:
        job = self.first(admit)
        if job is not None:
            self.remove(job.id)
        return job
