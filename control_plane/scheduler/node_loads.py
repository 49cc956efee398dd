"""Per node, demand against what it received and was entitled to, queue waits and its status
(pure: a function of the scheduler core at `now`, published every second in the live view).

Demand and waits come from the core's `LiveWindows` (`core.watch`), received from the
ledger's windowed service; both are Unified Tokens per second over the ledger's window.
Siblings (the tenants; one tenant's applications; one application's agents) are judged
together by `core.entitlement.judge`. O(nodes + pending) per call.
"""

from __future__ import annotations

from collections import defaultdict

from control_plane.contracts.checkpoints import NodeCount
from control_plane.core.entitlement import DEFAULT_TOLERANCE, Claim, judge
from control_plane.core.node_views import node_counts
from control_plane.core.scheduler_core import SchedulerCore

Node = tuple[str, ...]
DEFAULT_WAIT_THRESHOLD_S = 2.0


def _oldest_arrivals(core: SchedulerCore) -> dict[Node, float]:
    oldest: dict[Node, float] = {}
    for job in core.pending.values():
        for depth in (1, 2, 3):
            node = job.path[:depth]
            oldest[node] = min(oldest.get(node, job.arrival), job.arrival)
    return oldest


def node_loads(
    core: SchedulerCore,
    now: float,
    tolerance: float = DEFAULT_TOLERANCE,
    wait_threshold_s: float = DEFAULT_WAIT_THRESHOLD_S,
) -> list[NodeCount]:
    """Every node with requests, service or demand in the window (or known to the ledger),
    sorted by path. A node is backlogged when its oldest queued request has waited at least
    `wait_threshold_s`, or the p95 wait of its requests dispatched in the window did."""
    ledger, watch = core.ctx.ledger, core.watch
    counts = {tuple(c["path"]): (c["queued"], c["inflight"]) for c in node_counts(core)}
    if watch is not None:
        watch.prune(now)
    nodes: set[Node] = set(counts)
    for depth in (1, 2, 3):
        nodes.update(ledger.nodes_at(depth))
    nodes.update(watch.nodes() if watch is not None else ())
    oldest = _oldest_arrivals(core)
    claims: dict[Node, Claim] = {}
    waits: dict[Node, tuple[float | None, float]] = {}
    for node in nodes:
        p95 = watch.wait_p95(node, now) if watch is not None else None
        oldest_wait = max(0.0, now - oldest[node]) if node in oldest else 0.0
        waits[node] = (p95, oldest_wait)
        claims[node] = Claim(
            demand=watch.demand_rate(node, now) if watch is not None else 0.0,
            received=ledger.window(node, now).service / ledger.window_s,
            weight=core.ctx.weights.of(node),
            # waiting now: a drained node is not starved on its window's past waits
            backlogged=node in oldest
            and (oldest_wait >= wait_threshold_s or (p95 is not None and p95 >= wait_threshold_s)),
        )
    groups: dict[Node, list[Node]] = defaultdict(list)
    for node in sorted(nodes):
        groups[node[:-1]].append(node)
    out: list[NodeCount] = []
    for siblings in groups.values():
        verdicts = judge([claims[n] for n in siblings], tolerance)
        for node, verdict in zip(siblings, verdicts, strict=True):
            claim, (p95, oldest_wait) = claims[node], waits[node]
            queued, inflight = counts.get(node, (0, 0))
            out.append(
                NodeCount(
                    path=node,
                    queued=queued,
                    inflight=inflight,
                    weight=claim.weight,
                    demand_rate=claim.demand,
                    service_rate=claim.received,
                    entitled_rate=verdict.entitled,
                    entitled_share=verdict.entitled_share,
                    received_share=verdict.received_share,
                    wait_p95_s=p95,
                    oldest_wait_s=oldest_wait,
                    backlogged=claim.backlogged,
                    status=verdict.status,
                )
            )
    return sorted(out, key=lambda n: n.path)
