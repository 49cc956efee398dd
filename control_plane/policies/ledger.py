"""The ledger: service, SLO windows, virtual counters and credits per node of the hierarchy.

Nodes are path prefixes: `("t",)` a tenant, `("t", "app")` an application, `("t", "app",
"agent")` an agent. The dispatcher charges every prefix of a job's path as the job runs, so
service is known at every level whatever policy is active. Counter-based policies (VTC, WFQ,
HMFS) and ExFairS keep their fairness memory here rather than inside the policy object, which
is what lets that memory survive a policy switch or a scheduler fail-over (JSON snapshot).

Cost: a progress report charges every running job at every level, so the simulator's hot path
runs through here. Two representations keep it cheap without changing any number read:
batched charges (`charge_outputs`, `counter_sink`) are deferred and added in their original
order when read, and nodes whose histories are bound to stay equal (a tenant with a single
application and agent) share one record (`_extend`).
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from operator import add
from typing import Any, Protocol

from control_plane.policies.job import Job
from control_plane.policies.windows import SlidingWindow

Node = tuple[str, ...]
COUNTER_BACKLOG = 4096
"""Deferred amounts a counter may hold before `Ledger.settle` sums them unread."""
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


def prefixes(path: Node) -> Iterable[Node]:
    """`("t","a","g")` → `("t",)`, `("t","a")`, `("t","a","g")`."""
    return (path[:depth] for depth in range(1, len(path) + 1))


@functools.lru_cache(maxsize=65_536)
def group_of(parent: Node) -> str:
    """Key of the sibling group under `parent` (the unit of VTC/HMFS counter lifts)."""
    return json.dumps(list(parent))


@dataclass(frozen=True, slots=True)
class WindowStats:
    """A node's activity over the ledger's sliding window."""

    service: float
    completed: float
    violations: float

    @property
    def violation_rate(self) -> float:
        return self.violations / self.completed if self.completed > 0 else 0.0


@dataclass(slots=True)
class Account:
    """ExFairS micro-economy of one client: credits spent buy resource (priority)."""

    credit: int = 0
    resource: int = 0


class _Instant:
    """When a ledger's deferred output charges were made; all of them lie in one window bucket."""

    __slots__ = ("at",)

    def __init__(self) -> None:
        self.at = 0.0


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


class NodeStats:
    """Lifetime totals and sliding windows of one node (service in Unified Tokens).

    Output charges made by `Ledger.charge_outputs` are deferred: their costs wait, in order, in
    a pending list and are added one by one to `service` when it is next read, and to the
    service window when it is next read or when the ledger's window bucket ends. Every read
    therefore sees, bit for bit, the sums that charging at once would have produced; the cost
    of a charge is one list append per node, and a node nobody reads is summed once a bucket.
    One record may stand for several nodes with the same history (`owners`, `Ledger._extend`).
    """

    __slots__ = (
        "_in_service",
        "_instant",
        "_pending",
        "_service",
        "_w_service",
        "completed",
        "owners",
        "tokens_in",
        "tokens_out",
        "violations",
        "w_completed",
        "w_violations",
    )

    def __init__(self, window_s: float, bucket_s: float, instant: _Instant | None = None) -> None:
        self._service = 0.0
        self._pending: list[float] = []
        """Deferred output costs, oldest first; the list object is never replaced."""
        self._in_service = 0
        """How many of them `_service` already includes."""
        self._instant = instant if instant is not None else _Instant()
        self.owners = 1
        """How many nodes of the ledger share this record (see `Ledger._extend`)."""
        self.tokens_in = 0
        self.tokens_out = 0
        self.completed = 0
        self.violations = 0
        self._w_service = SlidingWindow(window_s, bucket_s)
        self.w_completed = SlidingWindow(window_s, bucket_s)
        self.w_violations = SlidingWindow(window_s, bucket_s)

    @property
    def pending_append(self) -> Callable[[float], None]:
        """Defers one output cost (for `Ledger.charge_outputs`, which keeps the bucket)."""
        return self._pending.append

    @property
    def service(self) -> float:
        pending, done = self._pending, self._in_service
        if done < len(pending):
            self._service = functools.reduce(add, pending[done:], self._service)
            self._in_service = len(pending)
        return self._service

    @service.setter
    def service(self, value: float) -> None:
        self._service = value
        self._in_service = len(self._pending)

    @property
    def w_service(self) -> SlidingWindow:
        self.settle()
        return self._w_service

    def settle(self) -> None:
        """Add the deferred costs to `service` and to the service window now, in order."""
        pending = self._pending
        if pending:
            _ = self.service
            self._w_service.add_all(self._instant.at, pending)
            pending.clear()
            self._in_service = 0

    def copy(self) -> NodeStats:
        """An independent record holding the same numbers (deferred costs included)."""
        self.settle()
        twin = NodeStats(self._w_service.window_s, self._w_service.bucket_s, self._instant)
        twin._service = self._service
        twin.tokens_in, twin.tokens_out = self.tokens_in, self.tokens_out
        twin.completed, twin.violations = self.completed, self.violations
        twin._w_service = self._w_service.copy()
        twin.w_completed = self.w_completed.copy()
        twin.w_violations = self.w_violations.copy()
        return twin

    def to_json(self) -> dict[str, Any]:
        return {
            "service": self.service,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "completed": self.completed,
            "violations": self.violations,
            "w_service": self.w_service.to_json(),
            "w_completed": self.w_completed.to_json(),
            "w_violations": self.w_violations.to_json(),
        }

    def load_json(self, data: dict[str, Any]) -> None:
        self._pending.clear()
        self.service = float(data["service"])
        self.tokens_in = int(data["tokens_in"])
        self.tokens_out = int(data["tokens_out"])
        self.completed = int(data["completed"])
        self.violations = int(data["violations"])
        self._w_service.load_json(data["w_service"])
        self.w_completed.load_json(data["w_completed"])
        self.w_violations.load_json(data["w_violations"])


class Ledger:
    """Per-node accounting shared by every policy; see the module docstring.

    Guarantees: `service` of a parent equals the sum over its children (every prefix is charged
    together); counters only move through `add_counter` (charges) and `lift` (never down).
    Batched charges (`charge_outputs`, `counter_sink`) are deferred until read but summed in
    the order they were made, so every value read equals that of charging one at a time.
    """

    def __init__(self, window_s: float = 60.0, bucket_s: float = 1.0) -> None:
        self.window_s = window_s
        self.bucket_s = bucket_s
        self._stats: dict[Node, NodeStats] = {}
        self._chains: dict[Node, tuple[NodeStats, ...]] = {}
        """Path → the distinct records of its prefixes, root first (cleared when one splits)."""
        self._sinks: dict[Node, _PathSink] = {}
        self._plan: CounterPlan | None = None
        self._plan_version: int | None = None
        """The counter plan the cached sinks were built for, and its weights' version then."""
        self._instant = _Instant()
        self._open: int | None = None
        """Window bucket of the deferred output charges (None: none since the last settle)."""
        self._deferred: set[Node] = set()
        """Paths charged by `charge_outputs` since the last settle."""
        self._counters: dict[Node, float] = {}
        self._counter_pending: dict[Node, list[float]] = {}
        """Deferred counter amounts per node, oldest first (list objects never replaced)."""
        self._backlog: set[Node] = set()
        self._last_left: dict[str, Node] = {}
        self._accounts: dict[Node, Account] = {}
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
        counters = [(self.counter_sink(node), weight(node)) for node in plan.nodes(path)]
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
        for node, pending in self._counter_pending.items():
            if len(pending) >= COUNTER_BACKLOG:
                self._settle_counter(node)

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

    def nodes_at(self, depth: int) -> list[Node]:
        """Every node of that depth the ledger has seen (charged, counted or credited)."""
        self._settle_counters()
        seen = set(self._stats) | set(self._counters) | set(self._accounts)
        return sorted(node for node in seen if len(node) == depth)

    # -- virtual counters (VTC, WFQ, HMFS) ------------------------------------------------
    def counter(self, node: Node) -> float:
        if self._counter_pending.get(node):
            self._settle_counter(node)
        return self._counters.get(node, 0.0)

    def counters(self, nodes: Iterable[Node]) -> list[float]:
        """`counter(node)` for every node, in order (one call for a whole sibling group)."""
        pending, values = self._counter_pending, self._counters
        out: list[float] = []
        for node in nodes:
            value = values.get(node, 0.0)
            amounts = pending.get(node)
            if amounts:
                value = values[node] = functools.reduce(add, amounts, value)
                amounts.clear()
            out.append(value)
        return out

    def add_counter(self, node: Node, amount: float) -> None:
        if self._counter_pending.get(node):
            self._settle_counter(node)
        self._counters[node] = self._counters.get(node, 0.0) + amount

    def counter_sink(self, node: Node) -> Callable[[float], None]:
        """A deferred `add_counter(node, ·)`: amounts are added, in order, before the next read.

        Used by `charge_outputs`; the callable stays valid as long as this ledger lives (it
        appends to a list that settling empties but never replaces).
        """
        pending = self._counter_pending.get(node)
        if pending is None:
            pending = self._counter_pending[node] = []
        return pending.append

    def _settle_counter(self, node: Node) -> None:
        pending = self._counter_pending[node]
        start = self._counters.get(node, 0.0)
        self._counters[node] = functools.reduce(add, pending, start)
        pending.clear()

    def _settle_counters(self) -> None:
        for node, pending in self._counter_pending.items():
            if pending:
                self._settle_counter(node)

    def lift(self, node: Node, floor: float) -> None:
        """`c = max(c, floor)`: a node returning from idleness banks no credit."""
        if floor > self.counter(node):
            self._counters[node] = floor

    def note_left(self, group: str, node: Node) -> None:
        """`node`'s request is the one that left the queue of `group` most recently."""
        self._last_left[group] = node

    def last_left(self, group: str) -> Node | None:
        return self._last_left.get(group)

    def is_backlogged(self, node: Node) -> bool:
        """Whether a counter policy last saw `node` with queued requests."""
        return node in self._backlog

    def set_backlogged(self, node: Node, backlogged: bool) -> None:
        if backlogged:
            self._backlog.add(node)
        else:
            self._backlog.discard(node)

    def reset_backlog(self, depths: Iterable[int], nodes: Iterable[Node]) -> None:
        """Replace the backlog marks of `depths` by exactly `nodes` (after an adopt)."""
        depth_set = set(depths)
        self._backlog = {n for n in self._backlog if len(n) not in depth_set}
        self._backlog.update(nodes)

    # -- ExFairS credits --------------------------------------------------------------------
    def account(self, node: Node) -> Account:
        account = self._accounts.get(node)
        if account is None:
            account = self._accounts[node] = Account()
        return account

    def find_account(self, node: Node) -> Account | None:
        """The account of `node` if it has one (reading never creates it)."""
        return self._accounts.get(node)

    def accounts(self) -> dict[Node, Account]:
        return dict(self._accounts)

    # -- persistence ------------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """Everything above as JSON (nodes as lists of names)."""
        self._settle_counters()
        return {
            "window_s": self.window_s,
            "bucket_s": self.bucket_s,
            "nodes": [[list(n), s.to_json()] for n, s in sorted(self._stats.items())],
            "counters": [[list(n), c] for n, c in sorted(self._counters.items())],
            "backlog": [list(n) for n in sorted(self._backlog)],
            "last_left": {g: list(n) for g, n in sorted(self._last_left.items())},
            "accounts": [
                [list(n), a.credit, a.resource] for n, a in sorted(self._accounts.items())
            ],
        }

    @classmethod
    def from_snapshot(cls, data: dict[str, Any]) -> Ledger:
        ledger = cls(window_s=float(data["window_s"]), bucket_s=float(data["bucket_s"]))
        for node, stats in data["nodes"]:
            ledger._node(tuple(node)).load_json(stats)
        ledger._counters = {tuple(n): float(c) for n, c in data["counters"]}
        ledger._backlog = {tuple(n) for n in data["backlog"]}
        ledger._last_left = {g: tuple(n) for g, n in data["last_left"].items()}
        ledger._accounts = {tuple(n): Account(int(c), int(r)) for n, c, r in data["accounts"]}
        return ledger
