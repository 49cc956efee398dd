"""RR — round-robin over clients (the ExFairS paper's baseline)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from control_plane.core.job import Job
from control_plane.core.ledger import Node
from control_plane.core.policy import Admit, Policy, PolicyContext, arrival_order
from control_plane.policies.queues import DuplicateJobError, JobQueue


class RrParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    level: int = Field(1, ge=1, le=3)
    """The client: 1 = tenant, 2 = application, 3 = agent."""


class RrPolicy(Policy):
    """Backlogged clients take turns, one request per turn, each client's requests FCFS.

    A client that becomes backlogged joins the end of the ring; a served client moves to the
    end; a client skipped because none of its jobs is admissible keeps its place at the front.
    Guarantee: between two dispatches of a backlogged client whose head is admissible, every
    other client is served at most once. Counts requests, not tokens.
    Cost: the ring is an ordered dict, so a turn, a join and a withdrawal are O(1) and a job
    enters or leaves its client's queue in O(log n).
    """

    name: ClassVar[str] = "rr"
    Params: ClassVar[type[BaseModel]] = RrParams

    def __init__(self, ctx: PolicyContext, params: BaseModel | None = None) -> None:
        super().__init__(ctx, params)
        assert isinstance(self.params, RrParams)
        self._level = self.params.level
        self._queues: dict[Node, JobQueue] = {}
        self._ring: OrderedDict[Node, None] = OrderedDict()
        self._client_of: dict[str, Node] = {}
        self._saved_ring: dict[Node, int] = {}

    def _enqueue(self, job: Job) -> None:
        if job.id in self._client_of:
            raise DuplicateJobError(f"job {job.id!r} is already pending")
        client = job.path[: self._level]
        if client not in self._queues:
            self._queues[client] = JobQueue()
            self._ring[client] = None
        self._queues[client].add(job)
        self._client_of[job.id] = client

    def push(self, job: Job, now: float) -> None:
        self._enqueue(job)

    def adopt(self, jobs: Iterable[Job], now: float) -> None:
        before = set(self._ring)
        for job in sorted(jobs, key=arrival_order):
            self._enqueue(job)
        joined = [client for client in self._ring if client not in before]
        rank = self._saved_ring
        joined.sort(key=lambda c: rank.get(c, len(rank)))  # stable: arrival order otherwise
        for client in joined:
            self._ring.move_to_end(client)
        self._saved_ring = {}

    def pop(self, now: float, admit: Admit) -> Job | None:
        for client in self._ring:
            job = self._queues[client].first(admit)
            if job is None:
                continue
            self._take(job)
            if client in self._queues:
                self._ring.move_to_end(client)
            else:
                del self._ring[client]
            return job
        return None

    def _take(self, job: Job) -> None:
        client = self._client_of.pop(job.id)
        queue = self._queues[client]
        queue.remove(job.id)
        if not queue:
            del self._queues[client]

    def remove(self, job_id: str) -> Job | None:
        client = self._client_of.pop(job_id, None)
        if client is None:
            return None
        queue = self._queues[client]
        job = queue.remove(job_id)
        if not queue:
            del self._queues[client]
            del self._ring[client]
        return job

    def jobs(self) -> Iterable[Job]:
        return [job for client in self._ring for job in self._queues[client]]

    def __len__(self) -> int:
        return len(self._client_of)

    def state(self) -> dict[str, Any]:
        return {"ring": [list(client) for client in self._ring]}

    def load_state(self, state: dict[str, Any]) -> None:
        self._saved_ring = {tuple(c): i for i, c in enumerate(state.get("ring", []))}
