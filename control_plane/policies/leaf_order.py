"""Kairos's order inside the leaves of a fair hierarchy (`hmfs` with `order: kairos`).

The fair policy decides *whose turn* it is (a leaf: a tenant, an application or an agent);
this decides which of that leaf's requests goes: Kairos's `(agent score, workflow start,
arrival, seq, id)`. Each backlogged leaf has its own `KairosPolicy` — its per-agent queues and
sorted agent heads (`agent_queues.py`), so a leaf's best admissible request costs what a
`kairos` pop costs, O(log n) when its first agent's head is admissible. Scores are the
context's workflow orchestrator's, read when an agent is first seen in a leaf and re-read for
every leaf only when the orchestrator recomputes them (`tick`), never on a push or pop.
"""

from __future__ import annotations

from control_plane.core.job import Job
from control_plane.core.ledger import Node
from control_plane.core.policy import Admit, PolicyContext
from control_plane.policies.kairos import KairosPolicy


class KairosLeaves:
    """Pending requests of each leaf in Kairos's order; a leaf's structure lives while the
    leaf has requests (a leaf seen again reads the scores in force, as a kept one would)."""

    __slots__ = ("_ctx", "_orders")

    def __init__(self, ctx: PolicyContext) -> None:
        self._ctx = ctx
        self._orders: dict[Node, KairosPolicy] = {}

    def add(self, leaf: Node, job: Job) -> None:
        order = self._orders.get(leaf)
        if order is None:
            order = self._orders[leaf] = KairosPolicy(self._ctx)
        order.push(job, job.arrival)

    def remove(self, leaf: Node, job_id: str) -> None:
        """Forget `job_id` (already gone when `pop` took it) and an emptied leaf."""
        order = self._orders.get(leaf)
        if order is None:
            return
        order.remove(job_id)
        if not len(order):
            del self._orders[leaf]

    def pop(self, leaf: Node, now: float, admit: Admit) -> Job | None:
        """The leaf's first admissible request in Kairos's order, taken from it (the caller
        then `remove`s it from its own structures, which forgets the emptied leaf)."""
        return self._orders[leaf].pop(now, admit)

    def tick(self, now: float) -> None:
        """Let the orchestrator recompute the scores when due; re-sort every leaf if it did."""
        if self._ctx.workflows.refresh(now):
            for order in self._orders.values():
                order.rerank()
