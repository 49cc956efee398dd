"""HMFS — hierarchical multi-modality fair scheduling (docs/algorithms.md §3)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from typing import Any, ClassVar, Literal

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
from control_plane.policies.counters import lift_adopted, lift_joining
from control_plane.policies.leaf_order import KairosLeaves
from control_plane.policies.min_index import Key, LazyMinIndex
from control_plane.policies.queues import DuplicateJobError, JobQueue

HeadKey = tuple[float, int, str]


class HmfsParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    depth: int = Field(3, ge=1, le=3)
    """Levels of the hierarchy: 1 = tenants, 2 = + applications, 3 = + agents."""
    order: Literal["fcfs", "kairos"] = "fcfs"
    """How the leaf whose turn it is serves its requests: arrival order, or Kairos's
    workflow-aware order (agent score, then workflow start; docs/algorithms.md §19.5)."""


class HmfsPolicy(Policy):
    """Descend tenant → application → agent, taking the backlogged child with least counter.

    Every node has a virtual counter in the ledger, charged `w_p · U(n_in) / w_node` at
    dispatch and `w_q · U(n_out) / w_node` as tokens stream, on every node of the job's path;
    `U` is the Unified Token cost (`job.unit_factor`), so an image or video request pays for
    its model's size. A node that becomes backlogged is lifted among its siblings (VTC's rule).
    Siblings tie on their earliest pending request, then id; the chosen leaf serves FCFS (or,
    with `order: kairos`, by Kairos's agent score, then workflow start: `leaf_order.py`), and
    an inadmissible subtree is skipped for the next one (work conserving).
    Guarantee: VTC's bound holds among siblings at every level, so a tenant's share does not
    grow with its number of applications or agents; with one app and one agent per tenant the
    order is VTC's. The leaf order never changes whose turn it is: counters and heads (the
    earliest arrival) are the same whatever `order` serves within the leaf.
    Cost: each internal node keeps its backlogged children in two `LazyMinIndex`es (by
    `(counter, head)` and by head), so push, pop, lift and charge are O(depth · log n); only a
    pop whose first choice `admit` refuses walks on through the tree. With `order: kairos`
    the leaf's pick is a `kairos` pop over its own agents (O(log n) when admissible), and the
    scores are re-read only when the orchestrator recomputes them, on the periodic tick.
    """

    name: ClassVar[str] = "hmfs"
    Params: ClassVar[type[BaseModel]] = HmfsParams

    def __init__(self, ctx: PolicyContext, params: BaseModel | None = None) -> None:
        super().__init__(ctx, params)
        assert isinstance(self.params, HmfsParams)
        self._depth = self.params.depth
        self._leaves: dict[Node, JobQueue] = {}
        self._kids: dict[Node, LazyMinIndex[Node]] = {}
        """Backlogged children of each backlogged internal node (and of the root `()`), by
        `(counter, head)`: the order of the descent."""
        self._heads: dict[Node, LazyMinIndex[Node]] = {}
        """The same children by head alone: the head of an internal node is its least one's."""
        self._head_of: dict[Node, HeadKey] = {}
        """Head of every backlogged node, kept exact on push and take."""
        self._pending: dict[Node, int] = {}
        self._leaf_of: dict[str, Node] = {}
        self._groups: dict[Node, str] = {}
        """`group_of(parent)` of every internal node served so far."""
        self._plan: CounterPlan | None = None
        self._counter = ctx.ledger.counter  # the ledger lives as long as the context
        counter, head_of = self._counter, self._head_of  # `_head_of` is never replaced

        def order_key(node: Node) -> Key:
            """`(counter, head)` of a backlogged node: the order of the descent."""
            return (counter(node), head_of[node])

        self._order_key = order_key
        self._served = KairosLeaves(ctx) if self.params.order == "kairos" else None
        """The leaves' Kairos order; None serves each leaf's FCFS queue."""
        self._open(())

    def leaf(self, job: Job) -> Node:
        return job.path[: self._depth]

    # -- indices ----------------------------------------------------------------------------
    def _open(self, node: Node) -> None:
        """Give internal `node` its (empty) child indices."""
        self._kids[node] = LazyMinIndex(self._order_key)
        self._heads[node] = LazyMinIndex(self._head)

    def _head(self, node: Node) -> HeadKey:
        """`(arrival, seq, id)` of the earliest pending request under `node`."""
        return self._head_of[node]

    def _file(self, node: Node) -> None:
        """(Re-)file `node` in its parent's indices at its current keys."""
        parent = node[:-1]
        self._heads[parent].touch(node)
        self._kids[parent].touch(node)

    def _children(self, parent: Node) -> Iterable[Node]:
        index = self._kids.get(parent)
        return index.members() if index is not None else ()

    # -- queue ------------------------------------------------------------------------------
    def _enqueue(self, job: Job) -> list[Node]:
        """Queue `job` (indices untouched); return the nodes of its path that were not
        backlogged before, tenant first."""
        if job.id in self._leaf_of:
            raise DuplicateJobError(f"job {job.id!r} is already pending")
        leaf = self.leaf(job)
        joined = [node for node in prefixes(leaf) if node not in self._pending]
        for node in prefixes(leaf):
            self._pending[node] = self._pending.get(node, 0) + 1
        queue = self._leaves.get(leaf)
        if queue is None:
            queue = self._leaves[leaf] = JobQueue()
        queue.add(job)
        if self._served is not None:
            self._served.add(leaf, job)
        self._leaf_of[job.id] = leaf
        return joined

    def push(self, job: Job, now: float) -> None:
        leaf = self.leaf(job)
        key = (job.arrival, job.seq, job.id)
        joined = self._enqueue(job)
        for node in joined:
            if len(node) < self._depth:
                self._open(node)
        ledger = self.ctx.ledger
        for node in reversed(list(prefixes(leaf))):  # children before parents: heads are fresh
            if node in joined:
                self._head_of[node] = key
                least = self._kids[node[:-1]].least()
                lift_joining(ledger, node, group_of(node[:-1]), least[0][0] if least else None)
                self._file(node)
            elif key < self._head_of[node]:  # a re-queued older request: the head moves back
                self._head_of[node] = key
                self._file(node)
            else:
                break  # every node above has a head at most this one's

    def adopt(self, jobs: Iterable[Job], now: float) -> None:
        before = {parent: set(index.members()) for parent, index in self._kids.items()}
        joined: dict[Node, set[Node]] = {}
        for job in sorted(jobs, key=arrival_order):
            for node in self._enqueue(job):
                joined.setdefault(node[:-1], set()).add(node)
        for parent, nodes in sorted(joined.items()):
            lift_adopted(self.ctx.ledger, group_of(parent), before.get(parent, set()), nodes)
        self.ctx.ledger.reset_backlog(range(1, self._depth + 1), self._pending)
        self._reindex()

    def _reindex(self) -> None:
        """Every head and index afresh from the pending nodes, deepest first."""
        children: dict[Node, list[Node]] = {}
        for node in self._pending:
            children.setdefault(node[:-1], []).append(node)
        self._head_of.clear()
        for leaf, queue in self._leaves.items():
            entry = queue.head_entry()
            assert entry is not None
            self._head_of[leaf] = (entry[1], entry[2], entry[3])
        for parent in sorted(children, key=len, reverse=True):
            if parent not in self._kids:
                self._open(parent)
            kids = children[parent]
            if parent:
                self._head_of[parent] = min(self._head_of[kid] for kid in kids)
            self._heads[parent].reset(kids)
            self._kids[parent].reset(kids)

    def _ordered(self, parent: Node) -> Iterator[Node]:
        """Backlogged children by counter; equal counters by earliest pending request.

        Lazily: the group of the least counter is found by one scan, and the other children
        are sorted only if the walk gets past that group (none of its jobs admissible).
        """
        kids = list(self._children(parent))
        if len(kids) <= 1:
            yield from kids  # an only child needs no counter
            return
        counters = self.ctx.ledger.counters(kids)
        low = min(counters)
        pairs = list(zip(counters, kids, strict=True))
        yield from self._by_head([n for c, n in pairs if c == low])
        rest = sorted(pair for pair in pairs if pair[0] != low)
        for _, group in itertools.groupby(rest, key=lambda k: k[0]):
            yield from self._by_head([n for _, n in group])

    def _by_head(self, nodes: list[Node]) -> list[Node]:
        """Siblings of equal counter, by their earliest pending request (heads only if tied)."""
        return nodes if len(nodes) == 1 else sorted(nodes, key=self._head)

    def _walk_leaves(self, parent: Node) -> Iterator[Node]:
        """Backlogged leaves under `parent` in HMFS order."""
        for kid in self._ordered(parent):
            if len(kid) == self._depth:
                yield kid
            else:
                yield from self._walk_leaves(kid)

    def _walk(self, parent: Node, refuses: Refuses | None = None) -> Iterator[Job]:
        """Pending jobs in HMFS order (FCFS within a leaf), without those of models `refuses`
        names."""
        for leaf in self._walk_leaves(parent):
            for _, job in self._leaves[leaf].candidates(refuses):
                yield job

    def _descend(self) -> Node | None:
        """The leaf whose turn it is: least (counter, head) at every level."""
        node: Node = ()
        while len(node) < self._depth:
            least = self._kids[node].least()
            if least is None:
                return None
            node = least[1]
        return node

    def pop(self, now: float, admit: Admit) -> Job | None:
        node = self._descend()
        if node is None:
            return None
        if self._served is not None:
            return self._pop_ordered(self._served, node, now, admit)
        first = self._leaves[node].head()
        assert first is not None
        if admit(first):
            self._take(first.id, served=True, head=True)
            return first
        for job in self._walk((), refusals(admit)):  # rare: scan on in the same order
            if job is not first and admit(job):
                self._take(job.id, served=True)
                return job
        return None

    def _pop_ordered(
        self, served: KairosLeaves, turn: Node, now: float, admit: Admit
    ) -> Job | None:
        """The first admissible job of leaf `turn` in the leaves' order; when it has none, of
        the next leaf in HMFS order that has one (rare: admission refused the whole leaf)."""
        job = served.pop(turn, now, admit)
        if job is None:
            for leaf in self._walk_leaves(()):
                if leaf != turn and (job := served.pop(leaf, now, admit)) is not None:
                    break
        if job is not None:
            self._take(job.id, served=True)
        return job

    def _take(self, job_id: str, served: bool, head: bool = False) -> Job | None:
        """Take the job out of the tree (`head`: it is its leaf's head)."""
        leaf = self._leaf_of.pop(job_id, None)
        if leaf is None:
            return None
        queue = self._leaves[leaf]
        job = queue.pop_head() if head else queue.remove(job_id)
        assert job is not None
        if not queue:
            del self._leaves[leaf]
        if self._served is not None:
            self._served.remove(leaf, job_id)
        gone = (job.arrival, job.seq, job.id)
        moved = True  # the node below lost its head: this one may have too
        ledger, pending, head_of = self.ctx.ledger, self._pending, self._head_of
        for depth in range(len(leaf), 0, -1):  # leaves first: parents' indices stay valid
            node, parent = leaf[:depth], leaf[: depth - 1]
            left = pending[node] - 1
            if not left:
                del pending[node]
                del head_of[node]
                self._kids[parent].discard(node)
                self._heads[parent].discard(node)
                self._kids.pop(node, None)
                self._heads.pop(node, None)
                ledger.set_backlogged(node, False)
            else:
                pending[node] = left
                if moved and head_of[node] == gone:
                    head_of[node] = self._next_head(node)  # later: the parent's entry still
                else:  # bounds it from below, so the parent's indices need no touch
                    moved = False
            if served:
                group = self._groups.get(parent)
                if group is None:
                    group = self._groups[parent] = group_of(parent)
                ledger.note_left(group, node)
        return job

    def _next_head(self, node: Node) -> HeadKey:
        if len(node) == self._depth:
            entry = self._leaves[node].head_entry()
            assert entry is not None
            return (entry[1], entry[2], entry[3])
        least = self._heads[node].least()
        assert least is not None
        return least[0]  # the key of `_heads` is a head

    def remove(self, job_id: str) -> Job | None:
        return self._take(job_id, served=False)

    def tick(self, now: float) -> None:
        if self._served is not None:
            self._served.tick(now)

    def jobs(self) -> Iterable[Job]:
        return list(self._walk(()))

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
