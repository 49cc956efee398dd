"""The ledger: service, SLO windows, virtual counters and credits per node of the hierarchy.

Nodes are path prefixes: `("t",)` a tenant, `("t", "app")` an application, `("t", "app",
"agent")` an agent. The dispatcher charges every prefix of a job's path as the job runs, so
service is known at every level whatever policy is active. Counter-based policies (VTC, WFQ,
HMFS) and ExFairS keep their fairness memory here rather than inside the policy object, which
is what lets that memory survive a policy switch or a scheduler fail-over (JSON snapshot).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from control_plane.policies.windows import SlidingWindow

Node = tuple[str, ...]


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


class NodeStats:
    """Lifetime totals and sliding windows of one node (service in Unified Tokens)."""

    __slots__ = (
        "completed",
        "service",
        "tokens_in",
        "tokens_out",
        "violations",
        "w_completed",
        "w_service",
        "w_violations",
    )

    def __init__(self, window_s: float, bucket_s: float) -> None:
        self.service = 0.0
        self.tokens_in = 0
        self.tokens_out = 0
        self.completed = 0
        self.violations = 0
        self.w_service = SlidingWindow(window_s, bucket_s)
        self.w_completed = SlidingWindow(window_s, bucket_s)
        self.w_violations = SlidingWindow(window_s, bucket_s)

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
        self.service = float(data["service"])
        self.tokens_in = int(data["tokens_in"])
        self.tokens_out = int(data["tokens_out"])
        self.completed = int(data["completed"])
        self.violations = int(data["violations"])
        self.w_service.load_json(data["w_service"])
        self.w_completed.load_json(data["w_completed"])
        self.w_violations.load_json(data["w_violations"])


class Ledger:
    """Per-node accounting shared by every policy; see the module docstring.

    Guarantees: `service` of a parent equals the sum over its children (every prefix is charged
    together); counters only move through `add_counter` (charges) and `lift` (never down).
    """

    def __init__(self, window_s: float = 60.0, bucket_s: float = 1.0) -> None:
        self.window_s = window_s
        self.bucket_s = bucket_s
        self._stats: dict[Node, NodeStats] = {}
        self._counters: dict[Node, float] = {}
        self._backlog: set[Node] = set()
        self._last_left: dict[str, Node] = {}
        self._accounts: dict[Node, Account] = {}

    # -- accounting, driven by the dispatcher -------------------------------------------
    def _node(self, node: Node) -> NodeStats:
        stats = self._stats.get(node)
        if stats is None:
            stats = self._stats[node] = NodeStats(self.window_s, self.bucket_s)
        return stats

    def charge_input(self, path: Node, n_in: int, cost: float, now: float) -> None:
        """A job on `path` was dispatched: its prompt costs `cost` Unified Tokens."""
        for node in prefixes(path):
            stats = self._node(node)
            stats.service += cost
            stats.tokens_in += n_in
            stats.w_service.add(now, cost)

    def charge_output(self, path: Node, n_out: int, cost: float, now: float) -> None:
        """`n_out` output tokens of a job on `path` streamed back, costing `cost`."""
        for node in prefixes(path):
            stats = self._node(node)
            stats.service += cost
            stats.tokens_out += n_out
            stats.w_service.add(now, cost)

    def record_completion(self, path: Node, violated: bool, now: float) -> None:
        for node in prefixes(path):
            stats = self._node(node)
            stats.completed += 1
            stats.w_completed.add(now, 1.0)
            if violated:
                stats.violations += 1
                stats.w_violations.add(now, 1.0)

    # -- reads ----------------------------------------------------------------------------
    def stats(self, node: Node) -> NodeStats | None:
        return self._stats.get(node)

    def service(self, node: Node) -> float:
        stats = self._stats.get(node)
        return stats.service if stats is not None else 0.0

    def window(self, node: Node, now: float) -> WindowStats:
        stats = self._stats.get(node)
        if stats is None:
            return WindowStats(0.0, 0.0, 0.0)
        return WindowStats(
            stats.w_service.total(now), stats.w_completed.total(now), stats.w_violations.total(now)
        )

    def nodes_at(self, depth: int) -> list[Node]:
        """Every node of that depth the ledger has seen (charged, counted or credited)."""
        seen = set(self._stats) | set(self._counters) | set(self._accounts)
        return sorted(node for node in seen if len(node) == depth)

    # -- virtual counters (VTC, WFQ, HMFS) ------------------------------------------------
    def counter(self, node: Node) -> float:
        return self._counters.get(node, 0.0)

    def add_counter(self, node: Node, amount: float) -> None:
        self._counters[node] = self._counters.get(node, 0.0) + amount

    def lift(self, node: Node, floor: float) -> None:
        """`c = max(c, floor)`: a node returning from idleness banks no credit."""
        if floor > self._counters.get(node, 0.0):
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
