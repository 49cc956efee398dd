"""Agents in a learned order, requests within an agent by their workflow's start.

The building block of the workflow-aware policies (`kairos`, `ayo`). The global order is
`(rank of the job's agent, workflow start, arrival, seq, id)`: across agents by the rank the
subclass gives (`rank`, smaller first); within an agent — and among agents of equal rank, as
before anything is learned — the request whose workflow started earliest first.

One queue per agent (keyed by workflow start only, so a new rank never re-sorts it) and a
sorted list of the agents' heads keyed `(rank, head's key)`. A pop walks the heads in order
and stops once a head cannot beat the best admissible job found: O(log n) when the first
head is admissible. Ranks are read when an agent is first seen and on `rerank` (the periodic
tick, when what they read moved), which re-sorts the heads only: O(agents log agents).
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel
from sortedcontainers import SortedList

from control_plane.core.job import Job
from control_plane.core.policy import Admit, Policy, PolicyContext
from control_plane.policies.queues import JobQueue, SortKey

AgentKey = tuple[str, str, str]
OrderKey = tuple[float, float, int, str]
HeadEntry = tuple[float, OrderKey, AgentKey]


def workflow_start(job: Job) -> float:
    return job.workflow_start if job.workflow_start is not None else job.arrival


def workflow_first(job: Job) -> SortKey:
    return (workflow_start(job),)


def order_key(job: Job) -> OrderKey:
    return (workflow_start(job), job.arrival, job.seq, job.id)


class AgentQueuesPolicy(Policy):
    """Serves the admissible job with the smallest `(rank(agent), workflow start, arrival,
    seq, id)`. Subclasses define `rank` and `learned` (whether what `rank` reads moved)."""

    def __init__(self, ctx: PolicyContext, params: BaseModel | None = None) -> None:
        super().__init__(ctx, params)
        self._queues: dict[AgentKey, JobQueue] = {}
        self._ranks: dict[AgentKey, float] = {}
        self._where: dict[str, AgentKey] = {}
        self._heads: SortedList = SortedList()
        self._head_of: dict[AgentKey, HeadEntry] = {}

    def rank(self, agent: AgentKey) -> float:
        return 0.0

    def learned(self, now: float) -> bool:
        """True when what `rank` reads has changed since the last call."""
        return False

    def rerank(self) -> None:
        """Re-read every agent's rank and re-sort the heads."""
        self._ranks = {agent: self.rank(agent) for agent in self._queues}
        self._heads.clear()
        self._head_of.clear()
        for agent in self._queues:
            self._refresh(agent)

    def tick(self, now: float) -> None:
        if self.learned(now):
            self.rerank()

    def _refresh(self, agent: AgentKey) -> None:
        old = self._head_of.pop(agent, None)
        if old is not None:
            self._heads.remove(old)
        head = self._queues[agent].head()
        if head is not None:
            entry = (self._ranks[agent], order_key(head), agent)
            self._heads.add(entry)
            self._head_of[agent] = entry

    def push(self, job: Job, now: float) -> None:
        agent = job.path
        queue = self._queues.get(agent)
        if queue is None:
            queue = self._queues[agent] = JobQueue(workflow_first)
            self._ranks[agent] = self.rank(agent)
        queue.add(job)
        self._where[job.id] = agent
        if queue.head() is job:
            self._refresh(agent)

    def pop(self, now: float, admit: Admit) -> Job | None:
        best: tuple[float, OrderKey] | None = None
        chosen: Job | None = None
        for rank, head_key, agent in self._heads:
            if best is not None and (rank, head_key) >= best:
                break
            job = self._queues[agent].first(admit)
            if job is not None and (best is None or (rank, order_key(job)) < best):
                best, chosen = (rank, order_key(job)), job
        if chosen is not None:
            self.remove(chosen.id)
        return chosen

    def remove(self, job_id: str) -> Job | None:
        agent = self._where.pop(job_id, None)
        if agent is None:
            return None
        queue = self._queues[agent]
        was_head = queue.head()
        job = queue.remove(job_id)
        if was_head is not None and was_head.id == job_id:
            self._refresh(agent)
        return job

    def jobs(self) -> Iterable[Job]:
        return [job for queue in self._queues.values() for job in queue]

    def __len__(self) -> int:
        return len(self._where)
