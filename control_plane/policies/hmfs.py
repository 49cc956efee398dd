"""HMFS — hierarchical multi-modality fair scheduling (docs/algorithms.md §3)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from control_plane.core.job import Job
from control_plane.core.ledger import CounterCell, CounterPlan, Node, group_of, prefixes
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


_NO_HEAD: HeadKey = (float("inf"), 0, "")
"""The head of a node not yet filed (every filed node has a pending request's)."""


class _Tree:
    """One backlogged node of the hierarchy (or the root): its pending count, its head, its
    counter's cell in the ledger, and — internal — its backlogged children in two
    `LazyMinIndex`es, or — a leaf — its queue."""

    __slots__ = ("cell", "group", "head", "heads", "kids", "node", "parent", "pending", "queue")

    def __init__(self, node: Node, parent: _Tree | None, group: str, cell: CounterCell) -> None:
        self.node = node
        self.cell = cell
        """The node's virtual counter in the ledger (read without a lookup by path)."""
        self.parent = parent
        self.group = group
        """`group_of(parent.node)`: the sibling group this node's counter is lifted in."""
        self.pending = 0
        self.head: HeadKey = _NO_HEAD
        self.kids: LazyMinIndex[_Tree] | None = None
        self.heads: LazyMinIndex[_Tree] | None = None
        self.queue: JobQueue | None = None


def _head(tree: _Tree) -> HeadKey:
    return tree.head


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
    Cost: each backlogged node is one `_Tree` holding its count, head and counter cell (read
    without hashing its path); an internal one keeps its backlogged children in two
    `LazyMinIndex`es (by `(counter, head)` and by head), so push, pop, lift and charge are
    O(depth · log n); only a pop whose first choice `admit` refuses walks on through the tree.
    With `order: kairos` the leaf's pick is a `kairos` pop over its own agents (O(log n) when
    admissible), and the scores are re-read only when the orchestrator recomputes them, on the
    periodic tick.
    """

    name: ClassVar[str] = "hmfs"
    Params: ClassVar[type[BaseModel]] = HmfsParams

    def __init__(self, ctx: PolicyContext, params: BaseModel | None = None) -> None:
        super().__init__(ctx, params)
        assert isinstance(self.params, HmfsParams)
        self._depth = self.params.depth
        self._trees: dict[Node, _Tree] = {}
        """Every backlogged node (the root `()` always)."""
        self._leaf_of: dict[str, _Tree] = {}
        self._plan: CounterPlan | None = None

        def order_key(tree: _Tree) -> Key:
            """`(counter, head)` of a backlogged node: the order of the descent."""
            cell = tree.cell
            return (cell.read() if cell.pending else cell.value, tree.head)

        self._order_key = order_key
        self._served = KairosLeaves(ctx) if self.params.order == "kairos" else None
        """The leaves' Kairos order; None serves each leaf's FCFS queue."""
        self._root = self._grow((), None)

    def leaf(self, job: Job) -> Node:
        return job.path[: self._depth]

    # -- nodes ------------------------------------------------------------------------------
    def _grow(self, node: Node, parent: _Tree | None) -> _Tree:
        """A new backlogged `node` under `parent` (indices or queue empty, not yet filed)."""
        group = group_of(parent.node) if parent is not None else ""
        tree = self._trees[node] = _Tree(node, parent, group, self.ctx.ledger.counter_cell(node))
        if len(node) < self._depth:
            tree.kids = LazyMinIndex(self._order_key)
            tree.heads = LazyMinIndex(_head)
        else:
            tree.queue = JobQueue()
        return tree

    def _file(self, tree: _Tree) -> None:
        """(Re-)file `tree` in its parent's indices at its current keys."""
        parent = tree.parent
        assert parent is not None and parent.kids is not None and parent.heads is not None
        parent.heads.touch(tree)
        parent.kids.touch(tree)

    def _children(self, parent: Node) -> list[_Tree]:
        tree = self._trees.get(parent)
        return list(tree.kids.members()) if tree is not None and tree.kids is not None else []

    # -- queue ------------------------------------------------------------------------------
    def _enqueue(self, job: Job) -> tuple[_Tree, list[_Tree]]:
        """Queue `job` (indices untouched); → its leaf and the nodes of its path that were not
        backlogged before, tenant first."""
        if job.id in self._leaf_of:
            raise DuplicateJobError(f"job {job.id!r} is already pending")
        trees, joined = self._trees, []
        tree = self._root
        for node in prefixes(self.leaf(job)):
            nxt = trees.get(node)
            if nxt is None:
                nxt = self._grow(node, tree)
                joined.append(nxt)
            nxt.pending += 1
            tree = nxt
        assert tree.queue is not None
        tree.queue.add(job)
        if self._served is not None:
            self._served.add(tree.node, job)
        self._leaf_of[job.id] = tree
        return tree, joined

    def push(self, job: Job, now: float) -> None:
        key = (job.arrival, job.seq, job.id)
        leaf, joined = self._enqueue(job)
        ledger = self.ctx.ledger
        tree: _Tree | None = leaf
        while tree is not None and tree.parent is not None:  # children first: heads are fresh
            parent = tree.parent
            if tree in joined:
                tree.head = key
                assert parent.kids is not None
                least = parent.kids.least()
                lift_joining(ledger, tree.node, tree.group, least[0][0] if least else None)
                self._file(tree)
            elif key < tree.head:  # a re-queued older request: the head moves back
                tree.head = key
                self._file(tree)
            else:
                break  # every node above has a head at most this one's
            tree = parent

    def adopt(self, jobs: Iterable[Job], now: float) -> None:
        before = {
            node: {kid.node for kid in tree.kids.members()}
            for node, tree in self._trees.items()
            if tree.kids is not None
        }
        joined: dict[Node, set[Node]] = {}
        for job in sorted(jobs, key=arrival_order):
            for tree in self._enqueue(job)[1]:
                joined.setdefault(tree.node[:-1], set()).add(tree.node)
        for parent, nodes in sorted(joined.items()):
            lift_adopted(self.ctx.ledger, group_of(parent), before.get(parent, set()), nodes)
        pending = {node: t.pending for node, t in self._trees.items() if node}
        self.ctx.ledger.reset_backlog(range(1, self._depth + 1), pending)
        self._reindex()

    def _reindex(self) -> None:
        """Every head and index afresh from the pending nodes, deepest first."""
        children: dict[Node, list[_Tree]] = {}
        for node, tree in self._trees.items():
            if node:
                children.setdefault(node[:-1], []).append(tree)
        for tree in self._trees.values():
            if tree.queue is not None:
                entry = tree.queue.head_entry()
                assert entry is not None
                tree.head = (entry[1], entry[2], entry[3])
        for parent in sorted(children, key=len, reverse=True):
            tree, kids = self._trees[parent], children[parent]
            assert tree.kids is not None and tree.heads is not None
            if parent:
                tree.head = min(kid.head for kid in kids)
            tree.heads.reset(kids)
            tree.kids.reset(kids)

    def _ordered(self, parent: Node) -> Iterator[_Tree]:
        """Backlogged children by counter; equal counters by earliest pending request.

        Lazily: the group of the least counter is found by one scan, and the other children
        are sorted only if the walk gets past that group (none of its jobs admissible).
        """
        kids = self._children(parent)
        if len(kids) <= 1:
            yield from kids  # an only child needs no counter
            return
        counters = self.ctx.ledger.counters([kid.node for kid in kids])
        low = min(counters)
        pairs = list(zip(counters, kids, strict=True))
        yield from self._by_head([t for c, t in pairs if c == low])
        rest = sorted((pair for pair in pairs if pair[0] != low), key=lambda p: (p[0], p[1].head))
        for _, group in itertools.groupby(rest, key=lambda k: k[0]):
            yield from self._by_head([t for _, t in group])

    def _by_head(self, trees: list[_Tree]) -> list[_Tree]:
        """Siblings of equal counter, by their earliest pending request (heads only if tied)."""
        return trees if len(trees) == 1 else sorted(trees, key=_head)

    def _walk_leaves(self, parent: Node) -> Iterator[_Tree]:
        """Backlogged leaves under `parent` in HMFS order."""
        for kid in self._ordered(parent):
            if kid.queue is not None:
                yield kid
            else:
                yield from self._walk_leaves(kid.node)

    def _walk(self, parent: Node, refuses: Refuses | None = None) -> Iterator[Job]:
        """Pending jobs in HMFS order (FCFS within a leaf), without those of models `refuses`
        names."""
        for leaf in self._walk_leaves(parent):
            assert leaf.queue is not None
            for _, job in leaf.queue.candidates(refuses):
                yield job

    def _descend(self) -> _Tree | None:
        """The leaf whose turn it is: least (counter, head) at every level."""
        tree = self._root
        kids = tree.kids
        while kids is not None:
            least = kids.least()
            if least is None:
                return None
            tree = least[1]
            kids = tree.kids
        return tree

    def pop(self, now: float, admit: Admit) -> Job | None:
        leaf = self._descend()
        if leaf is None:
            return None
        if self._served is not None:
            return self._pop_ordered(self._served, leaf.node, now, admit)
        assert leaf.queue is not None
        first = leaf.queue.head()
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
                if leaf.node != turn and (job := served.pop(leaf.node, now, admit)) is not None:
                    break
        if job is not None:
            self._take(job.id, served=True)
        return job

    def _take(self, job_id: str, served: bool, head: bool = False) -> Job | None:
        """Take the job out of the tree (`head`: it is its leaf's head)."""
        leaf = self._leaf_of.pop(job_id, None)
        if leaf is None:
            return None
        queue = leaf.queue
        assert queue is not None
        job = queue.pop_head() if head else queue.remove(job_id)
        assert job is not None
        if self._served is not None:
            self._served.remove(leaf.node, job_id)
        gone = (job.arrival, job.seq, job.id)
        moved = True  # the node below lost its head: this one may have too
        ledger, trees = self.ctx.ledger, self._trees
        tree, parent = leaf, leaf.parent
        while parent is not None:  # leaves first: parents' indices stay valid
            left = tree.pending = tree.pending - 1
            if not left:
                del trees[tree.node]
                assert parent.kids is not None and parent.heads is not None
                parent.kids.discard(tree)
                parent.heads.discard(tree)
                ledger.set_backlogged(tree.node, False)
            elif moved and tree.head == gone:
                tree.head = self._next_head(tree)  # later: the parent's entry still bounds
            else:  # it from below, so the parent's indices need no touch
                moved = False
            if served:
                ledger.note_left(tree.group, tree.node)
            tree, parent = parent, parent.parent
        return job

    def _next_head(self, tree: _Tree) -> HeadKey:
        if tree.queue is not None:
            entry = tree.queue.head_entry()
            assert entry is not None
            return (entry[1], entry[2], entry[3])
        assert tree.heads is not None
        least = tree.heads.least()
        assert least is not None
        return least[0]  # the key of `heads` is a head

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
                {"node": list(node), "counter": counter(node), "queued": tree.pending}
                for node, tree in sorted(self._trees.items())
                if node
            ]
        }
