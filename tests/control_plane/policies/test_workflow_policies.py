"""kairos, ayo and parrot: agent order from what the orchestrator learned, workflow start
order within an agent."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from control_plane.core.job import Job
from control_plane.core.policy import PolicyContext
from control_plane.core.workflows.orchestrator import Orchestrator
from control_plane.policies.agent_queues import AgentQueuesPolicy
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


class Ranked(AgentQueuesPolicy):
    """Ranks from a table (changed between pops with `rerank`)."""

    name = "ranked-test"

    def __init__(self, ctx: PolicyContext) -> None:
        super().__init__(ctx)
        self.table: dict[str, float] = {}

    def rank(self, agent: tuple[str, str, str]) -> float:
        return self.table.get(agent[2], 0.0)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 5), st.floats(0, 100), st.booleans()), max_size=40),
    st.dictionaries(st.integers(0, 5).map(str), st.sampled_from([0.0, 1.0, 2.0]), max_size=6),
    st.dictionaries(st.integers(0, 5).map(str), st.sampled_from([0.0, 1.0, 2.0]), max_size=6),
)
def test_the_order_is_rank_then_workflow_start_among_admissible_jobs(
    spec: list[tuple[int, float, bool]], before: dict[str, float], after: dict[str, float]
) -> None:
    """Against a brute-force sort, with refused jobs and a rerank halfway."""
    policy = Ranked(PolicyContext())
    policy.table = before
    refused = set()
    for k, (agent, start, ok) in enumerate(spec):
        j = job(f"j{k}", arrival=float(k), agent=str(agent))
        j.workflow_start = start
        policy.push(j, 0.0)
        if not ok:
            refused.add(j.id)
    pending = {j.id: j for j in policy.jobs()}
    popped = 0
    while True:
        if popped == len(spec) // 2:
            policy.table = after
            policy.rerank()
        table = policy.table
        admissible = [j for j in pending.values() if j.id not in refused]
        want = min(
            admissible,
            key=lambda j: (table.get(j.agent, 0.0), j.workflow_start, j.arrival, j.seq, j.id),
            default=None,
        )
        got = policy.pop(0.0, lambda j: j.id not in refused)
        assert (got and got.id) == (want and want.id)
        if got is None:
            break
        del pending[got.id]
        popped += 1
    assert len(policy) == len(refused)
