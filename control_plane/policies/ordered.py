"""Single-queue policies: one static sort key per job, FCFS among equal keys."""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel

from control_plane.core.job import Job
from control_plane.core.policy import Admit, Policy, PolicyContext
from control_plane.policies.queues import JobQueue, SortKey


class OrderedPolicy(Policy):
    """Serves the admissible job with the smallest `(key(job), arrival, seq, id)`.

    Subclasses define `key`; it is computed once when the job is pushed, so it must depend
    only on the job and the context at that moment.
    """

    def __init__(self, ctx: PolicyContext, params: BaseModel | None = None) -> None:
        super().__init__(ctx, params)
        self._queue = JobQueue(self.key)

    def key(self, job: Job) -> SortKey:
        return ()

    def push(self, job: Job, now: float) -> None:
        self._queue.add(job)

    def pop(self, now: float, admit: Admit) -> Job | None:
        return self._queue.pop_first(admit)

    def remove(self, job_id: str) -> Job | None:
        return self._queue.remove(job_id)

    def jobs(self) -> Iterable[Job]:
        return list(self._queue)

    def __len__(self) -> int:
        return len(self._queue)
