"""Per node of the hierarchy, what an operator watches: queue, service, fairness, SLOs.

A pure function of the scheduler core at `now` (no I/O); the leader computes it when
Prometheus scrapes (`FairnessCollector`), from the same core its live view comes from.
"""

from __future__ import annotations

from dataclasses import dataclass

from control_plane.core.ledger import Node
from control_plane.core.node_views import node_counts
from control_plane.core.scheduler_core import SchedulerCore
from control_plane.policies.safi import safi_scores

LEVELS = ("tenant", "app", "agent")
DEFAULT_SAFI_ALPHA = 0.7
"""Weight of SLO violations in SAFI when the active policy has none of its own (ExFairS's)."""


@dataclass(frozen=True, slots=True)
class NodeFairness:
    """One node's gauges. `slo_attainment` is None while nothing completed in the window."""

    path: Node
    queued: int
    inflight: int
    oldest_wait_s: float
    counter: float
    credit: int
    safi: float
    service_rate: float
    """Unified Tokens per second served over the ledger's window."""
    slo_attainment: float | None

    @property
    def level(self) -> str:
        return LEVELS[len(self.path) - 1]


def node_fairness(
    core: SchedulerCore, now: float, alpha: float = DEFAULT_SAFI_ALPHA
) -> list[NodeFairness]:
    """Every node the ledger knows or that has requests queued or running, tenants first.

    SAFI is computed among the nodes of one level (tenants among tenants, …) with weight
    `alpha` on SLO violations, ExFairS's definition; the oldest wait is the age of the node's
    earliest queued request (0 when none waits).
    """
    ledger = core.ctx.ledger
    counts = {tuple(c["path"]): (c["queued"], c["inflight"]) for c in node_counts(core)}
    oldest: dict[Node, float] = {}
    for job in core.pending.values():
        for depth in (1, 2, 3):
            node = job.path[:depth]
            oldest[node] = min(oldest.get(node, job.arrival), job.arrival)
    rows: list[NodeFairness] = []
    for depth in (1, 2, 3):
        nodes = sorted(set(ledger.nodes_at(depth)) | {n for n in counts if len(n) == depth})
        safi = safi_scores(ledger, nodes, now, alpha)
        for node in nodes:
            window = ledger.window(node, now)
            account = ledger.find_account(node)
            rows.append(
                NodeFairness(
                    path=node,
                    queued=counts.get(node, (0, 0))[0],
                    inflight=counts.get(node, (0, 0))[1],
                    oldest_wait_s=max(0.0, now - oldest[node]) if node in oldest else 0.0,
                    counter=ledger.counter(node),
                    credit=account.credit if account is not None else 0,
                    safi=safi[node],
                    service_rate=window.service / ledger.window_s,
                    slo_attainment=(1.0 - window.violation_rate if window.completed > 0 else None),
                )
            )
    return rows
