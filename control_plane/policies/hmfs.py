"""HMFS — hierarchical multi-modality fair scheduling (docs/algorithms.md §3)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from control_plane.core.job import Job
from control_plane.core.ledger import CounterPlan, Node, group_of, prefixes
from control_plane.core.policy import (
    Admit,
    Policy,
    PolicyContext,
    Refuses,
    arrival_order,
    refusals,
)
from control_plane.policies.counters import lift_adopted, lift_on_backlog
from control_plane.policies.queues import DuplicateJobError, JobQueue

HeadKey = tuple[float, int, str]


class HmfsParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    depth: int = Field(3, ge=1, le=3)
    """Levels of the hierarchy: 1 = tenants, 2 = + applications, 3 = + agents."""


class HmfsPolicy(Policy):
    """Descend tenant → application → agent, taking the backlogged child with least counter.

    Every node has a virtual counter in the ledger, charged `w_p · U(n_in) / w_node` at
    dispatch and `w_q · U(n_out) / w_node` as tokens stream, on every node of the job's path;
    `U` is the Unified Token cost (`job.unit_factor`), so an image or video request pays for
    its model's size. A node that becomes backlogged is lifted among its siblings (VTC's rule).
    Siblings tie on their earliest pending request, then id; the chosen leaf serves FCFS, and
    an inadmissible subtree is skipped for the next one (work conserving).
    Guarantee: VTC's bound holds among siblings at every level, so a tenant's share does not
    grow with its number of applications or agents; with one app and one agent per tenant the
    order is VTC's.
    """

    name: ClassVar[str] = "hmfs"
    Params: ClassVar[type[BaseModel]] = HmfsParams

    def __init__(self, ctx: PolicyContext, params: BaseModel | None = None) -> None:
        super().__init__(ctx, params)
        assert isinstance(self.params, HmfsParams)
        self._depth = self.params.depth
        self._leaves: dict[Node, JobQueue] = {}
        self._children: dict[Node, set[Node]] = {}
        """Backlogged children of each backlogged internal node (and of the root `()`)."""
        self._pending: dict[Node, int] = {}
        self._leaf_of: dict[str, Node] = {}
        self._plan: CounterPlan | None = None

    def leaf(self, job: Job) -> Node:
        return job.path[: self._depth]

    # -- queue ------------------------------------------------------------------------------
    def _enqueue(self, job: Job) -> list[Node]:
        """Queue `job`; return the nodes of its path that were not backlogged before."""
        if job.id in self._leaf_of:
            raise DuplicateJobError(f"job {job.id!r} is already pending")
        leaf = self.leaf(job)
        joined = [node for node in prefixes(leaf) if node not in self._pending]
        for node in prefixes(leaf):
            self._pending[node] = self._pending.get(node, 0) + 1
        for node in joined:
            self._children.setdefault(node[:-1], set()).add(node)
        queue = self._leaves.get(leaf)
        if queue is None:
            queue = self._leaves[leaf] = JobQueue()
        queue.add(job)
        self._leaf_of[job.id] = leaf
        return joined

    def push(self, job: Job, now: float) -> None:
        ledger = self.ctx.ledger
        for node in self._enqueue(job):
            siblings = [kid for kid in self._children[node[:-1]] if kid != node]
            lift_on_backlog(ledger, node, group_of(node[:-1]), siblings)

    def adopt(self, jobs: Iterable[Job], now: float) -> None:
        before = {parent: set(kids) for parent, kids in self._children.items()}
        joined: dict[Node, set[Node]] = {}
        for job in sorted(jobs, key=arrival_order):
            for node in self._enqueue(job):
                joined.setdefault(node[:-1], set()).add(node)
        for parent, nodes in sorted(joined.items()):
            lift_adopted(self.ctx.ledger, group_of(parent), before.get(parent, set()), nodes)
        self.ctx.ledger.reset_backlog(range(1, self._depth + 1), self._pending)

    def _head(self, node: Node, memo: dict[Node, HeadKey]) -> HeadKey:
        key = memo.get(node)
        if key is None:
            if len(node) == self._depth:
                entry = self._leaves[node].head_entry()
                assert entry is not None
                key = (entry[1], entry[2], entry[3])
            else:
                key = min(self._head(child, memo) for child in self._children[node])
            memo[node] = key
        return key

    def _ordered(self, parent: Node, memo: dict[Node, HeadKey]) -> Iterator[Node]:
        """Backlogged children by counter; equal counters by earliest pending request.

        Lazily: the group of the least counter is found by one scan, and the other children
        are sorted only if the walk gets past that group (none of its jobs admissible).
        """
        kids = list(self._children.get(parent, ()))
        if len(kids) <= 1:
            yield from kids  # an only child needs no counter
            return
        counters = self.ctx.ledger.counters(kids)
        low = min(counters)
        pairs = list(zip(counters, kids, strict=True))
        yield from self._by_head([n for c, n in pairs if c == low], memo)
        rest = sorted(pair for pair in pairs if pair[0] != low)
        for _, group in itertools.groupby(rest, key=lambda k: k[0]):
            yield from self._by_head([n for _, n in group], memo)

    def _by_head(self, nodes: list[Node], memo: dict[Node, HeadKey]) -> list[Node]:
        """Siblings of equal counter, by their earliest pending request (heads only if tied)."""
        return nodes if len(nodes) == 1 else sorted(nodes, key=lambda n: self._head(n, memo))

    def _walk(
        self, parent: Node, memo: dict[Node, HeadKey], refuses: Refuses | None = None
    ) -> Iterator[Job]:
        """Pending jobs in HMFS order, without those of models `refuses` names."""
        for kid in self._ordered(parent, memo):
            if len(kid) == self._depth:
                for _, job in self._leaves[kid].candidates(refuses):
                    yield job
            else:
                yield from self._walk(kid, memo, refuses)

    def pop(self, now: float, admit: Admit) -> Job | None:
        for job in self._walk((), {}, refusals(admit)):
            if admit(job):
                self._take(job.id, served=True)
                return job
        return None

    def _take(self, job_id: str, served: bool) -> Job | None:
        leaf = self._leaf_of.pop(job_id, None)
        if leaf is None:
            return None
        job = self._leaves[leaf].remove(job_id)
        if not self._leaves[leaf]:
            del self._leaves[leaf]
        ledger = self.ctx.ledger
        for node in reversed(list(prefixes(leaf))):  # leaves first: parents' sets stay valid
            self._pending[node] -= 1
            if self._pending[node] == 0:
                del self._pending[node]
                self._children[node[:-1]].discard(node)
                self._children.pop(node, None)
                ledger.set_backlogged(node, False)
            if served:
                ledger.note_left(group_of(node[:-1]), node)
        return job

    def remove(self, job_id: str) -> Job | None:
        return self._take(job_id, served=False)

    def jobs(self) -> Iterable[Job]:
        return list(self._walk((), {}))

    def __len__(self) -> int:
        return len(self._leaf_of)

    # -- charges ----------------------------------------------------------------------------
    def _charge(self, job: Job, cost: float) -> None:
        ledger, weights = self.ctx.ledger, self.ctx.weights
        for node in prefixes(self.leaf(job)):
            ledger.add_counter(node, cost / weights.of(node))

    def on_dispatch(self, job: Job, now: float) -> None:
        self._charge(job, self.ctx.cost.input_cost(job))

    def on_tokens(self, job: Job, n_out_delta: int, now: float) -> None:
        self._charge(job, self.ctx.cost.output_cost(job, n_out_delta))

    def counter_plan(self) -> CounterPlan:
        """`on_tokens` charges `cost / w` to every node of the job's leaf path."""
        if self._plan is None or self._plan.weights is not self.ctx.weights:
            depth = self._depth

            def nodes(path: Node) -> list[Node]:
                return list(prefixes(path[:depth]))

            self._plan = CounterPlan(owner=self, nodes=nodes, weights=self.ctx.weights)
        return self._plan

    def state(self) -> dict[str, Any]:
        counter = self.ctx.ledger.counter
        return {
            "nodes": [
                {"node": list(node), "counter": counter(node), "queued": count}
                for node, count in sorted(self._pending.items())
            ]
        }
