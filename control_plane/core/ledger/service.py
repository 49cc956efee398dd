"""Service accounting: every node's charges, SLO windows and deferred output charges.

The dispatcher charges every prefix of a job's path as the job runs, so service is known at
every level whatever policy is active. Cost: a progress report charges every running job at
every level, so the simulator's hot path runs through here. Two representations keep it cheap
without changing any number read: batched charges (`charge_outputs`) are deferred and added in
their original order when read, and nodes whose histories are bound to stay equal (a tenant
with a single application and agent) share one record (`_extend`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from control_plane.core.job import Job
from control_plane.core.ledger.counters import CounterBook
from control_plane.core.ledger.records import Instant, Node, NodeStats, WindowStats, prefixes

OutputCharge = tuple[Job, Node, int, float]
"""One running job's new output tokens, priced: `(job, job.path, n_out, cost)`."""


class WeightTable(Protocol):
    """Node weights (`policies.base.Weights`); `version` changes whenever a weight does."""

    version: int

    def of(self, node: Node) -> float: ...


@dataclass(frozen=True, slots=True)
class CounterPlan:
    """How a policy's `on_tokens` moves virtual counters: `cost / weights.of(node)` is added to
    the counter of every node of `nodes(path)`, in that order (VTC, WFQ, HMFS).

    `charge_outputs` charges these counters in the same pass as the service; it keeps what it
    derived from a plan while `owner`, `weights` and the weights' `version` stay the same.
    """

    owner: object
    nodes: Callable[[Node], Sequence[Node]]
    weights: WeightTable


class _PathSink:
    """Where `charge_outputs` puts a path's charges: its records' pending lists, the counters
    of the plan in force (`weighted` for weights other than 1), and a tally of its tokens."""

    __slots__ = ("appends", "chain", "path", "tokens", "weighted")

    def __init__(
        self,
        path: Node,
        chain: tuple[NodeStats, ...],
        counters: Sequence[tuple[Callable[[float], None], float]] = (),
    ) -> None:
        self.path = path
        self.chain = chain
        unit = [append for append, weight in counters if weight == 1.0]  # x / 1.0 == x
        self.appends = tuple([stats.pending_append for stats in chain] + unit)
        self.weighted = tuple((append, w) for append, w in counters if w != 1.0)
        self.tokens = 0
        """Output tokens charged to the path in the report being charged."""


class ServiceBook:
    """Service, token counts and windows per node; see the module docstring.

    Guarantees: `service` of a parent equals the sum over its children (every prefix is charged
    together). Batched charges are deferred until read but summed in the order they were made,
    so every value read equals that of charging one at a time.
    """

    def __init__(self, window_s: float, bucket_s: float, counters: CounterBook) -> None:
        self.window_s = window_s
        self.bucket_s = bucket_s
        self._counters = counters
        self._stats: dict[Node, NodeStats] = {}
        self._chains: dict[Node, tuple[NodeStats, ...]] = {}
        """Path → the distinct records of its prefixes, root first (cleared when one splits)."""
        self._sinks: dict[Node, _PathSink] = {}
        self._plan: CounterPlan | None = None
        self._plan_version: int | None = None
        """The counter plan the cached sinks were built for, and its weights' version then."""
        self._instant = Instant()
        self._open: int | None = None
        """Window bucket of the deferred output charges (None: none since the last settle)."""
        self._deferred: set[Node] = set()
        """Paths charged by `charge_outputs` since the last settle."""
        self.revision = 0
        """Bumped by every charge, so readers can tell that service may have moved."""

    # -- accounting, driven by the dispatcher -------------------------------------------
    def _node(self, node: Node) -> NodeStats:
        stats = self._stats.get(node)
        if stats is None:
            stats = self._stats[node] = NodeStats(self.window_s, self.bucket_s, self._instant)
        return stats

    def _chain(self, path: Node) -> tuple[NodeStats, ...]:
        """The records along `path`, root first, each once (see `_extend`)."""
        chain = self._chains.get(path)
        if chain is None:
            self._extend(path)
            records = (self._stats[node] for node in prefixes(path))
            chain = self._chains[path] = tuple(dict.fromkeys(records))
        return chain

    def _extend(self, path: Node) -> None:
        """Create the missing nodes of `path`; they share one fresh record.

        Rule: nodes share a record only while everything done to one was done to the other,
        which holds for charges (they reach every prefix of a path) as long as every known
        path holds all of the sharing nodes or none. So a new path first parts its existing
        prefixes from the nodes off the path they shared with; and a read that may prune a
        window gives its node a record of its own first (`_own`). Shared records therefore
        hold the very numbers separate ones would; a charge touches one record per distinct
        history instead of one per level.
        """
        nodes = list(prefixes(path))
        if all(node in self._stats for node in nodes):
            return
        on_path = set(nodes)
        for node in nodes:
            record = self._stats.get(node)
            if record is not None and record.owners > 1:
                self._split(record, on_path)
        missing = [node for node in nodes if node not in self._stats]
        record = NodeStats(self.window_s, self.bucket_s, self._instant)
        record.owners = len(missing)
        for node in missing:
            self._stats[node] = record

    def _split(self, record: NodeStats, keep: set[Node]) -> None:
        """The nodes of `keep` sharing `record` take a copy of it; the others keep it."""
        group = [node for node, stats in self._stats.items() if stats is record]
        moving = [node for node in group if node in keep]
        if not moving or len(moving) == len(group):
            return
        twin = record.copy()
        twin.owners, record.owners = len(moving), record.owners - len(moving)
        for node in moving:
            self._stats[node] = twin
        self._chains.clear()
        self._sinks.clear()

    def _own(self, node: Node) -> NodeStats | None:
        """`node`'s record, not shared with any other node (None if the ledger has none)."""
        record = self._stats.get(node)
        if record is not None and record.owners > 1:
            self._split(record, {node})
            record = self._stats[node]
        return record

    def charge_input(self, path: Node, n_in: int, cost: float, now: float) -> None:
        """A job on `path` was dispatched: its prompt costs `cost` Unified Tokens."""
        self.revision += 1
        for stats in self._chain(path):
            stats.service += cost
            stats.tokens_in += n_in
            stats.w_service.add(now, cost)

    def charge_output(self, path: Node, n_out: int, cost: float, now: float) -> None:
        """`n_out` output tokens of a job on `path` streamed back, costing `cost`."""
        self.revision += 1
        for stats in self._chain(path):
            stats.service += cost
            stats.tokens_out += n_out
            stats.w_service.add(now, cost)

    def charge_outputs(
        self, charges: Iterable[OutputCharge], now: float, plan: CounterPlan | None = None
    ) -> None:
        """`charge_output(path, n_out, cost, now)` for every charge, in order (one report), and
        `add_counter(node, cost / weight)` for the nodes of `plan`, if any.

        Everything is deferred (see `NodeStats`, `counter_sink`): a charge is one append per
        record and counter of its path, and every read sees exactly the sums of charging one
        job at a time. Token counts are tallied per path and added at the end (or before a
        new path may change which records are shared).
        """
        self._open_bucket(now)
        self._use_plan(plan)
        self.revision += 1
        sinks = self._sinks
        touched: list[_PathSink] = []
        for _, path, n_out, cost in charges:
            sink = sinks.get(path)
            if sink is None:
                self._add_tallies(touched)
                sink = sinks[path] = self._sink(path)
            if not sink.tokens:
                touched.append(sink)
            sink.tokens += n_out
            for append in sink.appends:
                append(cost)
            for append, weight in sink.weighted:
                append(cost / weight)
        self._add_tallies(touched)

    def _use_plan(self, plan: CounterPlan | None) -> None:
        """Rebuild the path sinks when the counters they charge may have changed."""
        if not self._same_plan(plan):
            self._plan = plan
            self._plan_version = None if plan is None else plan.weights.version
            self._sinks.clear()

    def _same_plan(self, plan: CounterPlan | None) -> bool:
        old = self._plan
        if plan is None or old is None:
            return plan is old
        return (
            plan.owner is old.owner
            and plan.weights is old.weights
            and plan.weights.version == self._plan_version
        )

    def _sink(self, path: Node) -> _PathSink:
        chain = self._chain(path)
        plan = self._plan
        if plan is None:
            return _PathSink(path, chain)
        weight = plan.weights.of
        counters = [(self._counters.sink(node), weight(node)) for node in plan.nodes(path)]
        return _PathSink(path, chain, counters)

    def _add_tallies(self, sinks: list[_PathSink]) -> None:
        """Add the tallied output tokens of `sinks` to their records; empties `sinks`."""
        for sink in sinks:
            for stats in sink.chain:
                stats.tokens_out += sink.tokens
            sink.tokens = 0
            self._deferred.add(sink.path)
        sinks.clear()

    def _open_bucket(self, now: float) -> None:
        """Deferred charges share one window bucket: settle them all when `now` leaves it."""
        index = math.floor(now / self.bucket_s)
        if index != self._open:
            self.settle()
            self._open = index
            self._instant.at = now

    def settle(self) -> None:
        """Add every deferred output charge to its nodes' service and windows now.

        Never needed for correctness (reads settle what they read); it bounds the pending
        lists and is done whenever the window bucket of the deferred charges ends. Counters
        are summed when read, or here once they hold `COUNTER_BACKLOG` deferred amounts.
        """
        for path in self._deferred:
            for stats in self._chain(path):
                stats.settle()
        self._deferred.clear()
        self._open = None
        self._counters.settle_long()

    def record_completion(self, path: Node, violated: bool, now: float) -> None:
        for stats in self._chain(path):
            stats.completed += 1
            stats.w_completed.add(now, 1.0)
            if violated:
                stats.violations += 1
                stats.w_violations.add(now, 1.0)

    # -- reads ----------------------------------------------------------------------------
    def stats(self, node: Node) -> NodeStats | None:
        """The node's record, its own (its windows may be read and pruned)."""
        return self._own(node)

    def service(self, node: Node) -> float:
        stats = self._stats.get(node)
        return stats.service if stats is not None else 0.0

    def services(self, nodes: Iterable[Node]) -> list[float]:
        """`service(node)` for every node, in order (one call for a whole sample)."""
        get = self._stats.get
        return [stats.service if (stats := get(node)) is not None else 0.0 for node in nodes]

    def window(self, node: Node, now: float) -> WindowStats:
        stats = self._own(node)  # reading prunes expired buckets: never another node's
        if stats is None:
            return WindowStats(0.0, 0.0, 0.0)
        return WindowStats(
            stats.w_service.total(now), stats.w_completed.total(now), stats.w_violations.total(now)
        )

    def nodes(self) -> set[Node]:
        return set(self._stats)

    def node_json(self) -> list[list[Any]]:
        return [[list(n), s.to_json()] for n, s in sorted(self._stats.items())]

    def load_node(self, node: Node, data: dict[str, Any]) -> None:
        self._node(node).load_json(data)
