"""VTC — Virtual Token Counter (Sheng et al., OSDI 2024), docs/algorithms.md §1."""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from control_plane.core.job import Job
from control_plane.core.ledger import CounterPlan, Node, group_of
from control_plane.core.policy import (
    Admit,
    Policy,
    PolicyContext,
    Refuses,
    arrival_order,
    refusals,
)
from control_plane.policies.counters import lift_adopted, lift_joining
from control_plane.policies.min_index import Key, LazyMinIndex
from control_plane.policies.queues import DuplicateJobError, JobQueue

Candidate = tuple[tuple[float, float, int, str], Job]


class VtcParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    level: int = Field(1, ge=1, le=3)
    """The client: 1 = tenant, 2 = application, 3 = agent."""
    cost_unit: Literal["unified", "raw"] = "unified"
    """`unified` prices tokens in Unified Tokens (docs/algorithms.md §0.3); `raw` counts a token
    as 1 whatever the model (the original VTC, for comparisons with HMFS)."""


class VtcPolicy(Policy):
    """Smallest virtual counter first; ties by earlier arrival, then seq, then id.

    Each client (tenant by default) has a counter in the ledger, charged `w_p · n_in / w` on
    dispatch and `w_q / w` per output token as it streams. A client that gets a request with
    none queued is lifted to the smallest backlogged counter (or, with an empty queue, to the
    counter of the client served last), so idleness banks no credit. `pop` returns the first
    admissible job in `(counter, arrival, seq, id)` order, so no worker idles while anything
    admissible waits. Guarantee (Theorem 4.4): two clients backlogged over an interval receive
    weighted service differing by at most `2 · max(w_p · L_in, w_q · M)`.
    Cost: push, pop, lift and charge are O(log n) in the backlogged clients (a `LazyMinIndex`
    of clients by `(counter, head)`); only a pop whose first choice `admit` refuses scans on.
    """

    name: ClassVar[str] = "vtc"
    Params: ClassVar[type[BaseModel]] = VtcParams

    def __init__(self, ctx: PolicyContext, params: BaseModel | None = None) -> None:
        super().__init__(ctx, params)
        assert isinstance(self.params, VtcParams)
        self._level = self.params.level
        self._raw = self.params.cost_unit == "raw"
        self._group = group_of(()) if self._level == 1 else f"flat:{self._level}"
        self._queues: dict[Node, JobQueue] = {}
        self._client_of: dict[str, Node] = {}
        self._plan: CounterPlan | None = None
        self._index: LazyMinIndex[Node] = LazyMinIndex(self._key)

    def client(self, job: Job) -> Node:
        return job.path[: self._level]

    # -- queue --------------------------------------------------------------------------
    def _key(self, client: Node) -> Key:
        """`(counter, arrival, seq, id)` of the client's head: the order of `pop`."""
        entry = self._queues[client].head_entry()
        assert entry is not None
        return (self.ctx.ledger.counter(client), entry[1], entry[2], entry[3])

    def _enqueue(self, job: Job) -> tuple[Node, bool, bool]:
        """Queue `job`; return (its client, whether the client joined the backlog, whether
        `job` became the head of a client already backlogged)."""
        if job.id in self._client_of:
            raise DuplicateJobError(f"job {job.id!r} is already pending")
        client = self.client(job)
        queue = self._queues.get(client)
        joined = queue is None
        if queue is None:
            queue = self._queues[client] = JobQueue()
        head = queue.head_entry()
        queue.add(job)
        self._client_of[job.id] = client
        return client, joined, not joined and queue.head_entry() != head

    def push(self, job: Job, now: float) -> None:
        client, joined, new_head = self._enqueue(job)
        if joined:
            least = self._index.least()
            lift_joining(self.ctx.ledger, client, self._group, least[0][0] if least else None)
        if joined or new_head:  # its key is new or smaller: file it again
            self._index.touch(client)

    def adopt(self, jobs: Iterable[Job], now: float) -> None:
        continuing = set(self._queues)
        joining = set()
        for job in sorted(jobs, key=arrival_order):
            client, joined, _ = self._enqueue(job)
            if joined:
                joining.add(client)
        lift_adopted(self.ctx.ledger, self._group, continuing, joining)
        self.ctx.ledger.reset_backlog([self._level], self._queues)
        self._index.reset(self._queues)

    def _candidates(self, refuses: Refuses | None = None) -> Iterator[Candidate]:
        """Every pending job in `(counter, arrival, seq, id)` order (see `JobQueue.candidates`)."""
        ledger = self.ctx.ledger

        def ordered(client: Node, queue: JobQueue) -> Iterator[Candidate]:
            counter = ledger.counter(client)
            for entry, job in queue.candidates(refuses):
                yield (counter, entry[1], entry[2], entry[3]), job

        streams = [ordered(c, q) for c, q in self._queues.items()]
        return heapq.merge(*streams, key=lambda candidate: candidate[0])

    def pop(self, now: float, admit: Admit) -> Job | None:
        least = self._index.least()
        if least is None:
            return None
        best = self._queues[least[1]].head()
        assert best is not None
        if admit(best):  # the common case, without building the merged order
            self._take(best)
            return best
        for _, job in self._candidates(refusals(admit)):
            if job is not best and admit(job):
                self._take(job)
                return job
        return None

    def _take(self, job: Job) -> None:
        client = self._client_of.pop(job.id)
        queue = self._queues[client]
        queue.remove(job.id)
        if not queue:
            del self._queues[client]
            self._index.discard(client)
            self.ctx.ledger.set_backlogged(client, False)
        self.ctx.ledger.note_left(self._group, client)

    def remove(self, job_id: str) -> Job | None:
        client = self._client_of.pop(job_id, None)
        if client is None:
            return None
        queue = self._queues[client]
        job = queue.remove(job_id)
        if not queue:
            del self._queues[client]
            self._index.discard(client)
            self.ctx.ledger.set_backlogged(client, False)
        return job

    def jobs(self) -> Iterable[Job]:
        return [job for _, job in self._candidates()]

    def __len__(self) -> int:
        return len(self._client_of)

    # -- charges --------------------------------------------------------------------------
    def _charge(self, job: Job, unified_cost: float) -> None:
        client = self.client(job)
        cost = unified_cost / job.unit_factor if self._raw else unified_cost
        self.ctx.ledger.add_counter(client, cost / self.ctx.weights.of(client))

    def on_dispatch(self, job: Job, now: float) -> None:
        self._charge(job, self.ctx.cost.input_cost(job))

    def on_tokens(self, job: Job, n_out_delta: int, now: float) -> None:
        self._charge(job, self.ctx.cost.output_cost(job, n_out_delta))

    def counter_plan(self) -> CounterPlan | None:
        """`on_tokens` charges `cost / w` to the client's counter (None for `raw` costs, which
        also divide by the job's unit factor)."""
        if self._raw:
            return None
        if self._plan is None or self._plan.weights is not self.ctx.weights:
            level = self._level

            def nodes(path: Node) -> list[Node]:
                return [path[:level]]

            self._plan = CounterPlan(owner=self, nodes=nodes, weights=self.ctx.weights)
        return self._plan

    def state(self) -> dict[str, Any]:
        ledger = self.ctx.ledger
        return {
            "clients": [
                {"node": list(c), "counter": ledger.counter(c), "queued": len(q)}
                for c, q in sorted(self._queues.items())
            ]
        }
