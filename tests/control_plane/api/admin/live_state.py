"""Real live state for admin tests: the scheduler's own core decides, and its checkpoints and
the request records land in Redis exactly as a leader would write them.

Two tenants: `alpha` (app `chat` with agents `planner` and `coder`, weight 2) and `beta` (app
`search`, agent `default`). Each request is submitted through the `RequestStore`, arrives at a
real `SchedulerCore` running ExFairS, is granted, streams output and (mostly) completes; one
request per tenant stays in flight and one stays queued. A credit round then runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from control_plane.contracts.checkpoints import LeaderState
from control_plane.contracts.knobs import PluginChoice
from control_plane.contracts.requests import Envelope
from control_plane.contracts.workers import WorkerEntry, WorkerSample
from control_plane.core.job import Job, Outcome, Slo
from control_plane.core.ledger import Ledger
from control_plane.core.scheduler_core import SchedulerCore
from control_plane.scheduler.rebuild import build_core
from control_plane.scheduler.views import live_view
from control_plane.scheduler.workers import observe, sync_workers
from control_plane.state import StateStores

WORKER = WorkerEntry(id="w1", url="http://127.0.0.1:9", model="m", max_num_seqs=64)
PLAN: tuple[tuple[str, str, str, int, bool], ...] = (
    # tenant, app, agent, output tokens, violates its 1 s e2e SLO
    ("alpha", "chat", "planner", 100, False),
    ("alpha", "chat", "planner", 120, True),
    ("alpha", "chat", "coder", 300, False),
    ("alpha", "chat", "coder", 80, False),
    ("beta", "search", "default", 40, True),
    ("beta", "search", "default", 60, True),
)


@dataclass
class LiveFacts:
    """What the published state must show."""

    core: SchedulerCore
    queued: dict[tuple[str, ...], int] = field(default_factory=dict)
    inflight: dict[tuple[str, ...], int] = field(default_factory=dict)


def _job(i: int, tenant: str, app: str, agent: str, now: float) -> Job:
    return Job(
        id=f"r{i}-{tenant}",
        tenant=tenant,
        app=app,
        agent=agent,
        model="m",
        arrival=now - 10 + i * 0.01,
        seq=i + 1,
        n_in=50,
        max_tokens=400,
        slo=Slo(e2e_s=1.0),
    )


def _count(table: dict[tuple[str, ...], int], job: Job) -> None:
    for depth in (1, 2, 3):
        node = job.path[:depth]
        table[node] = table.get(node, 0) + 1


async def _submit(stores: StateStores, core: SchedulerCore, job: Job, now: float) -> None:
    weights = {"tenant": 2.0 if job.tenant == "alpha" else 1.0, "app": 1.0, "agent": 1.0}
    envelope = Envelope(job, weights, "gw-test")
    await stores.requests.submit(
        envelope,
        request_id=job.id,
        tenant=job.tenant,
        gateway_id="gw-test",
        queue_cap=1000,
        now=now,
    )
    core.arrive(job, weights, now)


async def publish_live_state(stores: StateStores, now: float) -> LiveFacts:
    core = build_core({"policy": PluginChoice("exfairs")}, Ledger(), "vtc")
    sync_workers(core, [WORKER])
    observe(core, "w1", WorkerSample(True, now, running=2, waiting=0, kv_usage=0.25))
    facts = LiveFacts(core)
    running = [_job(i, *spec[:3], now) for i, spec in enumerate(PLAN)]
    extra_running = [
        _job(10, "alpha", "chat", "coder", now),
        _job(11, "beta", "search", "default", now),
    ]
    for job in [*running, *extra_running]:
        await _submit(stores, core, job, now)
    for decision in core.decide(now):
        await stores.requests.grant(
            decision.job.id, worker_id="w1", worker_url=WORKER.url or "", now=now
        )
    for job, (_, _, _, n_out, violated) in zip(running, PLAN, strict=True):
        core.progress(job.id, n_out, now)
        e2e = 2.0 if violated else 0.5
        core.complete(job.id, Outcome("ok", job.n_in, n_out, e2e_s=e2e), now)
        await stores.requests.finish(job.id, now=now, status="ok")
    for job in extra_running:
        core.progress(job.id, 10, now)
        _count(facts.inflight, job)
    for i, (tenant, app, agent) in enumerate(
        [("alpha", "chat", "planner"), ("beta", "search", "default")]
    ):
        job = _job(20 + i, tenant, app, agent, now)
        await _submit(stores, core, job, now)  # not decided: stays queued
        _count(facts.queued, job)
    core.tick(now)
    core.tick(now + 5.0)  # one ExFairS credit round
    await stores.checkpoints.save_leader(LeaderState(ledger=core.ctx.ledger.snapshot()))
    await stores.checkpoints.save_live(live_view(core, "leader-test", now))
    return facts
