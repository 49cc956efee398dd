"""The leader's tap into the rolling live history (`state.LiveHistory`): one sample per step."""

from __future__ import annotations

from collections.abc import Sequence

from control_plane.contracts.checkpoints import LiveView, NodeCount
from control_plane.core.ledger import Ledger
from control_plane.state import HistoryPoint, LiveHistory
from control_plane.state.live_history import MAX_NODES

DEFAULT_STEP_S = 5.0


def _busy(node: NodeCount) -> tuple[float, int]:
    return (node.service_rate + node.demand_rate, node.queued + node.inflight)


def chosen_nodes(nodes: Sequence[NodeCount], cap: int = MAX_NODES) -> list[NodeCount]:
    """Tenants, then applications, then the busiest agents (received + demanded rate, then
    queue + in flight), at most `cap` in all, sorted by path."""
    by_depth = sorted(nodes, key=lambda n: (len(n.path), tuple(-x for x in _busy(n)), n.path))
    return sorted(by_depth[:cap], key=lambda n: n.path)


def history_points(
    live: LiveView, ledger: Ledger, now: float, cap: int = MAX_NODES
) -> list[HistoryPoint]:
    """One point per chosen node of the live view, with the ledger's cumulative figures."""
    points = []
    for node in chosen_nodes(live.nodes, cap):
        window = ledger.window(node.path, now)
        done = window.completed
        points.append(
            HistoryPoint(
                key="/".join(node.path),
                service=ledger.service(node.path),
                service_rate=node.service_rate,
                demand_rate=node.demand_rate,
                counter=ledger.counter(node.path),
                queued=node.queued,
                inflight=node.inflight,
                wait_p95_s=node.wait_p95_s,
                slo_attainment_1m=None if done <= 0 else 1.0 - window.violations / done,
            )
        )
    return points


class HistoryTap:
    """Appends a sample at most once per `step_s` (the live view is saved every second).

    Rule: the first call records; later calls record once `step_s` passed since the last
    recorded sample. A failed append is retried at the next call.
    """

    def __init__(self, step_s: float = DEFAULT_STEP_S) -> None:
        self.step_s = step_s
        self.last: float | None = None

    async def record(self, history: LiveHistory, live: LiveView, ledger: Ledger) -> bool:
        """Append a sample of `live` when one is due; → whether one was written."""
        now = live.updated_at
        if self.last is not None and now - self.last < self.step_s:
            return False
        await history.append(history_points(live, ledger, now, history.max_nodes), now)
        self.last = now
        return True
