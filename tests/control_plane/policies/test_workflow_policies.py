"""kairos, ayo and parrot: agent order from what the orchestrator learned, workflow start
order within an agent."""

from __future__ import annotations

from control_plane.core.job import Job
from control_plane.core.policy import PolicyContext
from control_plane.core.workflows.orchestrator import Orchestrator
from control_plane.policies.registry import build_policy
from tests.control_plane.policies.jobs import job


def always(_: Job) -> bool:
    return True


def learned() -> Orchestrator:
    """A QA app learned from 40 workflows: router (1 s) → writer (4 s)."""
    orch = Orchestrator(idle_s=2.0, recompute_s=0.0)
    t = 0.0
    for i in range(40):
        for agent, upstream, start, dur in (
            ("router", None, 0.0, 1.0),
            ("writer", "router", 1.0, 4.0),
        ):
            j = job(f"w{i}{agent}", "acme", t + start, app="qa", agent=agent)
            j.workflow, j.upstream = f"w{i}", upstream
            orch.on_arrival(j, t + start)
            j.dispatched_at = t + start
            orch.on_finish(j, 10, t + start + dur)
        t += 10.0
        orch.tick(t)
    return orch


def drain(name: str, ctx: PolicyContext, jobs: list[Job]) -> list[str]:
    policy = build_policy(name, ctx)
    for j in jobs:
        policy.push(j, j.arrival)
    policy.tick(1000.0)
    out = []
    while (j := policy.pop(1000.0, always)) is not None:
        out.append(j.id)
    return out


def queued() -> list[Job]:
    jobs = []
    for i, (agent, wf_start) in enumerate([("router", 5.0), ("writer", 9.0), ("writer", 3.0)]):
        j = job(f"{agent}{i}", "acme", 500.0 + i, app="qa", agent=agent)
        j.workflow_start = wf_start
        jobs.append(j)
    return jobs


def test_kairos_serves_the_agent_nearest_its_workflows_end_first() -> None:
    order = drain("kairos", PolicyContext(workflows=learned()), queued())
    assert order == ["writer2", "writer1", "router0"]  # writer: less left; then earliest workflow


def test_ayo_serves_the_fewest_remaining_stages_first() -> None:
    assert drain("ayo", PolicyContext(workflows=learned()), queued()) == [
        "writer2",
        "writer1",
        "router0",
    ]


def test_with_nothing_learned_kairos_goes_by_workflow_start() -> None:
    assert drain("kairos", PolicyContext(), queued()) == ["writer2", "router0", "writer1"]


def test_parrot_is_arrival_order() -> None:
    assert drain("parrot", PolicyContext(workflows=learned()), queued()) == [
        "router0",
        "writer1",
        "writer2",
    ]
