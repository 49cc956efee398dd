"""One queue per agent, served in an agent order that changes only when the policy says so.

The building block of the workflow-aware policies (`kairos`, `ayo`): within an agent, jobs
go by `(workflow start, arrival, seq, id)` — the request whose workflow started earliest
first; across agents, by a rank the subclass gives (`rank`), re-read when `rerank` is called;
agents of equal rank share one workflow-start order. A pop walks the agents in rank order and
takes the first admissible job: O(agents + log n).
"""

from __future__ import annotations

from bisect import insort
from collections.abc import Iterable, Iterator

from pydantic import BaseModel

from control_plane.core.job import Job
from control_plane.core.policy import Admit, Policy, PolicyContext
from control_plane.policies.queues import JobQueue, SortKey

AgentKey = tuple[str, str, str]


def workflow_start(job: Job) -> float:
    return job.workflow_start if job.workflow_start is not None else job.arrival


def workflow_first(job: Job) -> SortKey:
    return (workflow_start(job),)


def order_key(job: Job) -> tuple[float, float, int, str]:
    return (workflow_start(job), job.arrival, job.seq, job.id)


class AgentQueuesPolicy(Policy):
    """Serves the admissible job of the best-ranked agent that has one; among agents of equal
    rank, the admissible job whose workflow started first. Subclasses define `rank` (smaller
    first)."""

    def __init__(self, ctx: PolicyContext, params: BaseModel | None = None) -> None:
        super().__init__(ctx, params)
        self._queues: dict[AgentKey, JobQueue] = {}
        self._where: dict[str, AgentKey] = {}
        self._order: list[tuple[float, AgentKey]] = []

    def rank(self, agent: AgentKey) -> float:
        return 0.0

    def rerank(self) -> None:
        """Re-read every agent's rank (after the learned priorities changed)."""
        self._order = sorted((self.rank(k), k) for k in self._queues)

    def learned(self, now: float) -> bool:
        """True when what `rank` reads has changed since the last call."""
        return False

    def tick(self, now: float) -> None:
        if self.learned(now):
            self.rerank()

    def push(self, job: Job, now: float) -> None:
        key = job.path
        queue = self._queues.get(key)
        if queue is None:
            queue = self._queues[key] = JobQueue(workflow_first)
            insort(self._order, (self.rank(key), key))
        queue.add(job)
        self._where[job.id] = key

    def pop(self, now: float, admit: Admit) -> Job | None:
        for group in self._rank_groups():
            heads = [h for h in (self._queues[k].first(admit) for k in group) if h is not None]
            if heads:
                job = min(heads, key=order_key)
                self._queues[self._where.pop(job.id)].remove(job.id)
                return job
        return None

    def _rank_groups(self) -> Iterator[list[AgentKey]]:
        """Agents with a queued job, grouped by equal rank, best rank first."""
        group: list[AgentKey] = []
        rank: float | None = None
        for r, key in self._order:
            if not self._queues[key]:
                continue
            if group and r != rank:
                yield group
                group = []
            group.append(key)
            rank = r
        if group:
            yield group

    def remove(self, job_id: str) -> Job | None:
        key = self._where.pop(job_id, None)
        return None if key is None else self._queues[key].remove(job_id)

    def jobs(self) -> Iterable[Job]:
        return list(self._all())

    def _all(self) -> Iterator[Job]:
        for queue in self._queues.values():
            yield from queue

    def __len__(self) -> int:
        return len(self._where)
