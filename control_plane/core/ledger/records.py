"""One node's record in the ledger: lifetime totals and sliding windows, with deferred charges.

Nodes are path prefixes: `("t",)` a tenant, `("t", "app")` an application, `("t", "app",
"agent")` an agent.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from operator import add
from typing import Any

from control_plane.core.windows import SlidingWindow

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


class Instant:
    """When a ledger's deferred output charges were made; all of them lie in one window bucket."""

    __slots__ = ("at",)

    def __init__(self) -> None:
        self.at = 0.0


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

    def __init__(self, window_s: float, bucket_s: float, instant: Instant | None = None) -> None:
        self._service = 0.0
        self._pending: list[float] = []
        """Deferred output costs, oldest first; the list object is never replaced."""
        self._in_service = 0
        """How many of them `_service` already includes."""
        self._instant = instant if instant is not None else Instant()
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
