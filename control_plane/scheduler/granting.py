"""Writing one dispatch cycle's grants to Redis (run by the scheduler leader only).

Rule: a cycle's decisions are granted in one batch (one round trip per chunk, the lease's
fencing token checked in the same script); a decision Redis refuses (its request left the
queue meanwhile) is undone in the core. Guarantee: a deposed leader grants nothing — its term
ends on the first refusal by fence, and nothing is granted once it has ended.
"""

from __future__ import annotations

import time

from control_plane.core.dispatcher import Decision
from control_plane.core.scheduler_core import SchedulerCore
from control_plane.scheduler.leader import LeaderTerm
from control_plane.scheduler.metrics import SchedulerMetrics
from control_plane.state import StaleLeader, StateStores
from control_plane.state.request_results import GrantOrder


async def grant(
    stores: StateStores,
    core: SchedulerCore,
    decisions: list[Decision],
    term: LeaderTerm | None,
    metrics: SchedulerMetrics,
) -> bool:
    """Grant `decisions`; refused ones are undone. False once deposed (nothing granted)."""
    if term is None or not term.active():
        return False
    orders = [GrantOrder(d.job.id, d.worker.id, d.worker.url) for d in decisions]
    try:
        granted = await stores.requests.grant_many(
            orders, now=time.time(), fencing_token=term.token, policy=core.dispatcher.policy.name
        )
    except StaleLeader:
        term.end()
        raise
    for decision, ok in zip(decisions, granted, strict=True):
        if ok:
            metrics.dispatched.labels(decision.worker.id).inc()
        else:
            core.undo(decision)
    return True
