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


class CounterCell:
    """One node's virtual counter: its value and the amounts deferred into it, oldest first.

    Rule: `read` adds the deferred amounts one at a time, in order, so a value read equals
    that of adding every amount as it came. `known` says whether the node has a counter
    the ledger reports (ever charged, lifted or loaded), so a cell a policy only holds to read
    faster changes nothing that is reported. The `pending` list object is never replaced:
    sinks hold its `append`.
    """

    __slots__ = ("known", "pending", "value")

    def __init__(self) -> None:
        self.value = 0.0
        self.pending: list[float] = []
        self.known = False

    def read(self) -> float:
        pending = self.pending
        if pending:
            self.value = functools.reduce(add, pending, self.value)
            pending.clear()
            self.known = True
        return self.value


class CounterBook:
    """Counter per node, deferred amounts, backlog marks and the last node to leave a group.

    Each node's counter is one `CounterCell`, created on first use and never replaced, so a
    policy may hold it (`cell`) and read it without a lookup by path.
    """

    def __init__(self) -> None:
        self._cells: dict[Node, CounterCell] = {}
        self.backlog: set[Node] = set()
        self.last_left: dict[str, Node] = {}

    def cell(self, node: Node) -> CounterCell:
        """`node`'s cell (created unknown, at 0.0, if it has none); valid as long as this book."""
        cell = self._cells.get(node)
        if cell is None:
            cell = self._cells[node] = CounterCell()
        return cell

    def counter(self, node: Node) -> float:
        cell = self._cells.get(node)
        if cell is None:
            return 0.0
        return cell.read() if cell.pending else cell.value

    def counters(self, nodes: Iterable[Node]) -> list[float]:
        """`counter(node)` for every node, in order (one call for a whole sibling group)."""
        cells = self._cells
        out: list[float] = []
        for node in nodes:
            cell = cells.get(node)
            out.append(0.0 if cell is None else cell.read())
        return out

    def nodes(self) -> set[Node]:
        """Every node with a known counter (deferred amounts count once they are settled)."""
        return {node for node, cell in self._cells.items() if cell.known}

    def add(self, node: Node, amount: float) -> None:
        cell = self._cells.get(node)  # `cell(node)` inline: every charge comes here
        if cell is None:
            cell = self._cells[node] = CounterCell()
        elif cell.pending:
            cell.read()
        cell.value += amount
        cell.known = True

    def sink(self, node: Node) -> Callable[[float], None]:
        """A deferred `add(node, ·)`: amounts are added, in order, before the next read.

        The callable stays valid as long as this book lives (it appends to a list that
        settling empties but never replaces).
        """
        return self.cell(node).pending.append

    def settle_all(self) -> None:
        for cell in self._cells.values():
            if cell.pending:
                cell.read()

    def settle_long(self, limit: int = COUNTER_BACKLOG) -> None:
        """Sum the counters holding at least `limit` deferred amounts (bounds memory)."""
        for cell in self._cells.values():
            if len(cell.pending) >= limit:
                cell.read()

    def lift(self, node: Node, floor: float) -> None:
        """`c = max(c, floor)`: a node returning from idleness banks no credit."""
        if floor > self.counter(node):
            cell = self.cell(node)
            cell.value, cell.known = floor, True

    def reset_backlog(self, depths: Iterable[int], nodes: Iterable[Node]) -> None:
        """Replace the backlog marks of `depths` by exactly `nodes` (after an adopt)."""
        depth_set = set(depths)
        self.backlog = {n for n in self.backlog if len(n) not in depth_set}
        self.backlog.update(nodes)

    def to_json(self) -> dict[str, Any]:
        self.settle_all()
        return {
            "counters": [[list(n), self._cells[n].value] for n in sorted(self.nodes())],
            "backlog": [list(n) for n in sorted(self.backlog)],
            "last_left": {g: list(n) for g, n in sorted(self.last_left.items())},
        }

    def load_json(self, data: dict[str, Any]) -> None:
        for cell in self._cells.values():  # in place: policies and sinks hold cells
            cell.value, cell.known = 0.0, False
        for n, c in data["counters"]:
            cell = self.cell(tuple(n))
            cell.value, cell.known = float(c), True
        self.backlog = {tuple(n) for n in data["backlog"]}
        self.last_left = {g: tuple(n) for g, n in data["last_left"].items()}
