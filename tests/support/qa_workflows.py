"""The QA application both the admin API's and the console's workflow tests feed: a router
(1 s), then math (2 s, three workflows in five) or humanities (6 s), 20 s apart — as request
rows (the history) and as a leader's orchestrator learns them (the live view)."""

from __future__ import annotations

from control_plane.core.job import Job
from control_plane.core.workflows.orchestrator import Orchestrator
from storage.records import RequestRecord


def history_call(
    i: int, wf: str, agent: str, upstream: str | None, start: float, secs: float
) -> RequestRecord:
    """One finished `acme/qa` call as the recorder stores it."""
    return RequestRecord(
        id=f"c{i}",
        tenant="acme",
        app="qa",
        agent=agent,
        workflow=wf,
        upstream=upstream,
        arrival=start,
        finished_at=start + secs,
        status="ok",
        e2e_ms=secs * 1000,
    )


def feed_qa(orch: Orchestrator, workflows: int, t: float) -> float:
    """`workflows` QA workflows from `t`, each closed by a tick; returns the last time."""
    for w in range(workflows):
        expert, secs = ("math", 2.0) if w % 5 < 3 else ("humanities", 6.0)
        for agent, upstream, start, dur in (("router", None, 0, 1.0), (expert, "router", 1, secs)):
            job = Job(f"{w}{agent}", "acme", t + start, 10, 10, app="qa", agent=agent)
            job.workflow, job.upstream = f"wf{w}", upstream
            orch.on_arrival(job, t + start)
            job.dispatched_at = t + start
            orch.on_finish(job, 10, t + start + dur)
        t += 20.0
        orch.tick(t)
    return t
