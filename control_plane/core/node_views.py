"""What the core holds, counted per node for the leader's views (admin API, fairness view).

Pure reads of a `SchedulerCore` and its ledger: they change nothing and do no I/O.
"""

from __future__ import annotations

from typing import Any

from control_plane.core.scheduler_core import SchedulerCore


def node_counts(core: SchedulerCore) -> list[dict[str, Any]]:
    """Queued and in-flight requests per node at every level (tenant, app, agent)."""
    counts: dict[tuple[str, ...], list[int]] = {}
    jobs = [(j, 0) for j in core.pending.values()] + [(r.job, 1) for r in core.running.values()]
    for job, slot in jobs:
        for depth in (1, 2, 3):
            counts.setdefault(job.path[:depth], [0, 0])[slot] += 1
    return [
        {"path": list(path), "queued": q, "inflight": i} for path, (q, i) in sorted(counts.items())
    ]


def tenant_view(core: SchedulerCore, now: float) -> dict[str, dict[str, Any]]:
    """Per tenant: queue depth, in-flight, virtual counter and service (for the admin API)."""
    ledger = core.ctx.ledger
    out: dict[str, dict[str, Any]] = {}
    for node in ledger.nodes_at(1):
        out[node[0]] = _node_json(ledger, node, now)
    for job in core.pending.values():
        out.setdefault(job.tenant, _empty())["queued"] += 1
    for run in core.running.values():
        out.setdefault(run.job.tenant, _empty())["inflight"] += 1
    return out


def _empty() -> dict[str, Any]:
    return {
        "queued": 0,
        "inflight": 0,
        "counter": 0.0,
        "service": 0.0,
        "tokens_in": 0,
        "tokens_out": 0,
        "completed": 0,
        "violations_window": 0.0,
        "service_window": 0.0,
    }


def _node_json(ledger: Any, node: tuple[str, ...], now: float) -> dict[str, Any]:
    stats = ledger.stats(node)
    window = ledger.window(node, now)
    out = _empty()
    out.update(
        counter=ledger.counter(node),
        service=ledger.service(node),
        service_window=window.service,
        violations_window=window.violations,
        completed_window=window.completed,
        violation_rate=window.violation_rate,
    )
    if stats is not None:
        out.update(
            tokens_in=stats.tokens_in, tokens_out=stats.tokens_out, completed=stats.completed
        )
    return out
