"""The live view the leader checkpoints to Redis for the admin API and the console."""

from __future__ import annotations

from typing import cast

from control_plane.contracts.checkpoints import LiveView, PolicyState, WorkerLive
from control_plane.contracts.knobs import JsonValue
from control_plane.core.entitlement import DEFAULT_TOLERANCE
from control_plane.core.node_views import tenant_view
from control_plane.core.scheduler_core import SchedulerCore
from control_plane.scheduler.autopilot import state as controller_state
from control_plane.scheduler.node_loads import DEFAULT_WAIT_THRESHOLD_S, node_loads
from control_plane.scheduler.workers import probe_of


def live_view(core: SchedulerCore, holder: str, now: float) -> LiveView:
    """Per tenant: queue, in-flight, counter, service; per node: demand, received, entitled,
    waits and status (`node_loads`); per worker: health and load; policy."""
    policy = core.dispatcher.policy
    workers = []
    for worker_id, slot in core.workers.items():
        view, probe = slot.view(), probe_of(core, worker_id)
        sample = probe.sample if probe is not None else None
        workers.append(
            WorkerLive(
                id=view.id,
                url=view.url,
                model=view.model,
                healthy=view.healthy,
                draining=view.draining,
                status=(probe.record.status or "active") if probe else "active",
                inflight=view.inflight,
                max_num_seqs=view.max_num_seqs,
                kv_tokens=view.kv_tokens,
                running=view.running,
                waiting=view.waiting,
                kv_usage=view.kv_usage,
                preemptions=view.preemptions,
                scraped_at=sample.scraped_at if sample else None,
                error=sample.error if sample else None,
            )
        )
    return LiveView(
        leader=holder,
        updated_at=now,
        policy=PolicyState(policy.name, policy.params.model_dump(), policy.snapshot()),
        admission=core.dispatcher.admission.snapshot(),
        placement=core.dispatcher.placement.snapshot(),
        queue_depth=len(core.pending),
        inflight=len(core.running),
        tenants=tenant_view(core, now),
        nodes=node_loads(core, now, DEFAULT_TOLERANCE, DEFAULT_WAIT_THRESHOLD_S),
        weights={"/".join(node): w for node, w in sorted(core.ctx.weights.table.items())},
        workers=workers,
        controller=controller_state(core),
        workflows=cast(JsonValue, core.ctx.workflows.learned()),
        window_s=core.ctx.ledger.window_s,
        tolerance=DEFAULT_TOLERANCE,
        wait_threshold_s=DEFAULT_WAIT_THRESHOLD_S,
        knob_errors=dict(core.knob_errors),
    )
