"""Virtual counters of VTC, WFQ and HMFS, with their backlog marks and lift memory.

Counters only move through `add` (charges, possibly deferred through `sink`) and `lift`
(never down). Deferred amounts are summed in the order they were made before any read, so
every value read equals that of adding them one at a time.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from operator import add
from typing import Any

from control_plane.core.ledger.records import Node

COUNTER_BACKLOG = 4096
"""Deferred amounts a counter may hold before `Ledger.settle` sums them unread."""


class CounterBook:
    """Counter per node, deferred amounts, backlog marks and the last node to leave a group."""

    def __init__(self) -> None:
        self.values: dict[Node, float] = {}
        self._pending: dict[Node, list[float]] = {}
        """Deferred counter amounts per node, oldest first (list objects never replaced)."""
        self.backlog: set[Node] = set()
        self.last_left: dict[str, Node] = {}

    def counter(self, node: Node) -> float:
        if self._pending.get(node):
            self._settle(node)
        return self.values.get(node, 0.0)

    def counters(self, nodes: Iterable[Node]) -> list[float]:
        """`counter(node)` for every node, in order (one call for a whole sibling group)."""
        pending, values = self._pending, self.values
        out: list[float] = []
        for node in nodes:
            value = values.get(node, 0.0)
            amounts = pending.get(node)
            if amounts:
                value = values[node] = functools.reduce(add, amounts, value)
                amounts.clear()
            out.append(value)
        return out

    def add(self, node: Node, amount: float) -> None:
        if self._pending.get(node):
            self._settle(node)
        self.values[node] = self.values.get(node, 0.0) + amount

    def sink(self, node: Node) -> Callable[[float], None]:
        """A deferred `add(node, ·)`: amounts are added, in order, before the next read.

        The callable stays valid as long as this book lives (it appends to a list that
        settling empties but never replaces).
        """
        pending = self._pending.get(node)
        if pending is None:
            pending = self._pending[node] = []
        return pending.append

    def _settle(self, node: Node) -> None:
        pending = self._pending[node]
        start = self.values.get(node, 0.0)
        self.values[node] = functools.reduce(add, pending, start)
        pending.clear()

    def settle_all(self) -> None:
        for node, pending in self._pending.items():
            if pending:
                self._settle(node)

    def settle_long(self, limit: int = COUNTER_BACKLOG) -> None:
        """Sum the counters holding at least `limit` deferred amounts (bounds memory)."""
        for node, pending in self._pending.items():
            if len(pending) >= limit:
                self._settle(node)

    def lift(self, node: Node, floor: float) -> None:
        """`c = max(c, floor)`: a node returning from idleness banks no credit."""
        if floor > self.counter(node):
            self.values[node] = floor

    def reset_backlog(self, depths: Iterable[int], nodes: Iterable[Node]) -> None:
        """Replace the backlog marks of `depths` by exactly `nodes` (after an adopt)."""
        depth_set = set(depths)
        self.backlog = {n for n in self.backlog if len(n) not in depth_set}
        self.backlog.update(nodes)

    def to_json(self) -> dict[str, Any]:
        self.settle_all()
        return {
            "counters": [[list(n), c] for n, c in sorted(self.values.items())],
            "backlog": [list(n) for n in sorted(self.backlog)],
            "last_left": {g: list(n) for g, n in sorted(self.last_left.items())},
        }

    def load_json(self, data: dict[str, Any]) -> None:
        self.values = {tuple(n): float(c) for n, c in data["counters"]}
        self.backlog = {tuple(n) for n in data["backlog"]}
        self.last_left = {g: tuple(n) for g, n in data["last_left"].items()}
