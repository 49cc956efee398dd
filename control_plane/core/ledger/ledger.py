"""`Ledger`: the one object policies, the dispatcher and the admin views read and charge.

A facade over three books kept apart by concern — service and SLO windows (`ServiceBook`),
virtual counters (`CounterBook`) and ExFairS accounts (`AccountBook`) — with one snapshot.
"""

from __future__ import annotations

from typing import Any

from control_plane.core.ledger.accounts import Account, AccountBook
from control_plane.core.ledger.counters import CounterBook
from control_plane.core.ledger.records import Node
from control_plane.core.ledger.service import ServiceBook


class Ledger:
    """Per-node accounting shared by every policy (see the package docstring).

    Guarantees: `service` of a parent equals the sum over its children (every prefix is charged
    together); counters only move through `add_counter` (charges) and `lift` (never down).
    Batched charges (`charge_outputs`, `counter_sink`) are deferred until read but summed in
    the order they were made, so every value read equals that of charging one at a time.
    """

    def __init__(self, window_s: float = 60.0, bucket_s: float = 1.0) -> None:
        self.window_s = window_s
        self.bucket_s = bucket_s
        self._counters = CounterBook()
        self._service = ServiceBook(window_s, bucket_s, self._counters)
        self._accounts = AccountBook()
        s, c = self._service, self._counters
        # The books' bound methods: a call through the facade costs what it did before.
        self.charge_input = s.charge_input
        self.charge_output = s.charge_output
        self.charge_outputs = s.charge_outputs
        self.settle = s.settle
        self.record_completion = s.record_completion
        self.stats = s.stats
        self.service = s.service
        self.services = s.services
        self.window = s.window
        self.counter = c.counter
        self.counters = c.counters
        self.add_counter = c.add
        self.counter_sink = c.sink
        self.counter_cell = c.cell
        self.lift = c.lift
        self.reset_backlog = c.reset_backlog

    @property
    def revision(self) -> int:
        """Bumped by every charge, so readers can tell that service may have moved."""
        return self._service.revision

    def nodes_at(self, depth: int) -> list[Node]:
        """Every node of that depth the ledger has seen (charged, counted or credited)."""
        self._counters.settle_all()
        seen = self._service.nodes() | self._counters.nodes() | set(self._accounts.accounts)
        return sorted(node for node in seen if len(node) == depth)

    # -- counter policies' memory -----------------------------------------------------------
    def note_left(self, group: str, node: Node) -> None:
        """`node`'s request is the one that left the queue of `group` most recently."""
        self._counters.last_left[group] = node

    def last_left(self, group: str) -> Node | None:
        return self._counters.last_left.get(group)

    def is_backlogged(self, node: Node) -> bool:
        """Whether a counter policy last saw `node` with queued requests."""
        return node in self._counters.backlog

    def set_backlogged(self, node: Node, backlogged: bool) -> None:
        if backlogged:
            self._counters.backlog.add(node)
        else:
            self._counters.backlog.discard(node)

    # -- ExFairS credits --------------------------------------------------------------------
    def account(self, node: Node) -> Account:
        return self._accounts.account(node)

    def find_account(self, node: Node) -> Account | None:
        """The account of `node` if it has one (reading never creates it)."""
        return self._accounts.accounts.get(node)

    def accounts(self) -> dict[Node, Account]:
        return dict(self._accounts.accounts)

    # -- persistence ------------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """Everything above as JSON (nodes as lists of names)."""
        return {
            "window_s": self.window_s,
            "bucket_s": self.bucket_s,
            "nodes": self._service.node_json(),
            **self._counters.to_json(),
            "accounts": self._accounts.to_json(),
        }

    @classmethod
    def from_snapshot(cls, data: dict[str, Any]) -> Ledger:
        ledger = cls(window_s=float(data["window_s"]), bucket_s=float(data["bucket_s"]))
        for node, stats in data["nodes"]:
            ledger._service.load_node(tuple(node), stats)
        ledger._counters.load_json(data)
        ledger._accounts.load_json(data["accounts"])
        return ledger
