"""hmfs with `order: kairos`: counters decide whose turn it is, Kairos's order decides which of
that leaf's requests goes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from control_plane.core.job import Job
from control_plane.core.policy import Policy, PolicyContext
from control_plane.core.workflows.orchestrator import Orchestrator
from control_plane.policies.agent_queues import order_key
from control_plane.policies.registry import build_policy
from tests.control_plane.policies.harness import Harness, ops_strategy
from tests.control_plane.policies.jobs import always, job
from tests.control_plane.policies.test_workflow_policies import learned

KAIROS = {"depth": 1, "order": "kairos"}


def qa_job(id: str, tenant: str, agent: str, arrival: float, wf_start: float) -> Job:
    """A call of `agent` of the QA app whose workflow started at `wf_start`."""
    j = job(id, tenant, arrival, app="qa", agent=agent)
    j.workflow_start = wf_start
    return j


def hmfs(ctx: PolicyContext, **params: object) -> Policy:
    return build_policy("hmfs", ctx, {"depth": 1, **params})


def pops(policy: Policy, now: float = 1000.0) -> list[str]:
    out = []
    while (j := policy.pop(now, always)) is not None:
        policy.on_dispatch(j, now)
        out.append(j.id)
    return out


def test_within_a_tenant_the_agent_nearer_its_workflow_s_end_goes_first() -> None:
    # learned(): writer (4 s left) scores nearer the zero-latency anchor than router (5 s)
    ctx = PolicyContext(workflows=learned())
    policy = hmfs(ctx, order="kairos")
    policy.push(qa_job("router", "acme", "router", 1.0, 1.0), 1.0)
    policy.push(qa_job("writer", "acme", "writer", 2.0, 2.0), 2.0)
    policy.tick(1000.0)  # the orchestrator computes the scores; the leaf re-sorts
    assert pops(policy) == ["writer", "router"]


def test_with_order_fcfs_the_same_tenant_is_served_in_arrival_order() -> None:
    policy = hmfs(PolicyContext(workflows=learned()))
    policy.push(qa_job("router", "acme", "router", 1.0, 1.0), 1.0)
    policy.push(qa_job("writer", "acme", "writer", 2.0, 2.0), 2.0)
    policy.tick(1000.0)
    assert pops(policy) == ["router", "writer"]


def test_scores_are_read_on_the_tick_only() -> None:
    """Before the orchestrator recomputes, every agent scores alike: workflow start order."""
    ctx = PolicyContext(workflows=learned())
    policy = hmfs(ctx, order="kairos")
    policy.push(qa_job("router", "acme", "router", 1.0, 1.0), 1.0)
    policy.push(qa_job("writer", "acme", "writer", 2.0, 2.0), 2.0)
    assert policy.pop(1000.0, always).id == "router"  # type: ignore[union-attr]
    policy.push(qa_job("router2", "acme", "router", 3.0, 3.0), 3.0)
    policy.tick(1000.0)
    assert pops(policy) == ["writer", "router2"]


def test_across_tenants_the_lower_counter_goes_first_whatever_the_scores() -> None:
    ctx = PolicyContext(workflows=learned())
    policy = hmfs(ctx, order="kairos")
    # acme's writer scores best and its workflow started first, but acme was served more
    policy.push(qa_job("acme-writer", "acme", "writer", 1.0, 0.0), 1.0)
    policy.push(qa_job("beta-router", "beta", "router", 2.0, 2.0), 2.0)
    policy.tick(1000.0)
    policy.on_dispatch(job("acme-earlier", "acme", 0.0, n_in=500, app="qa", agent="writer"), 3.0)
    assert ctx.ledger.counter(("acme",)) > ctx.ledger.counter(("beta",))
    assert pops(policy) == ["beta-router", "acme-writer"]


def test_a_leaf_refused_by_admission_passes_the_turn_on() -> None:
    ctx = PolicyContext(workflows=learned())
    policy = hmfs(ctx, order="kairos")
    policy.push(qa_job("a1", "acme", "router", 1.0, 1.0), 1.0)
    policy.push(qa_job("b1", "beta", "router", 2.0, 2.0), 2.0)
    policy.tick(1000.0)
    taken = policy.pop(1000.0, lambda j: j.tenant == "beta")
    assert taken is not None and taken.id == "b1"
    assert [j.id for j in policy.jobs()] == ["a1"]


@settings(max_examples=60, deadline=None)
@given(ops=ops_strategy)
def test_with_nothing_learned_kairos_order_is_hmfs_s_own(ops: list[tuple[object, ...]]) -> None:
    """No scores and no workflows: every agent scores 0 and a workflow starts at its call's
    arrival, so the Kairos order of a leaf is its FCFS order and every decision is the same."""
    for depth in (1, 3):
        fcfs = Harness(build_policy("hmfs", PolicyContext(), {"depth": depth}))
        kairos = Harness(build_policy("hmfs", PolicyContext(), {**KAIROS, "depth": depth}))
        fcfs.run(ops)
        kairos.run(ops)
        assert kairos.log == fcfs.log
        assert kairos.drain() == fcfs.drain()


AGENTS = ("router", "writer", "other")


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["acme", "beta", "gamma"]),
            st.sampled_from(AGENTS),
            st.floats(0, 100),
            st.integers(1, 400),
            st.booleans(),
        ),
        min_size=1,
        max_size=40,
    )
)
def test_each_pop_is_the_least_counter_tenant_s_kairos_first(
    spec: list[tuple[str, str, float, int, bool]],
) -> None:
    """Against brute force: the tenant served has the least counter among the backlogged,
    and its job is the least `(score, workflow start, arrival, seq, id)` of that tenant."""
    orch: Orchestrator = learned()
    ctx = PolicyContext(workflows=orch)
    policy = hmfs(ctx, order="kairos")
    pending: dict[str, Job] = {}
    for k, (tenant, agent, start, n_in, pop_now) in enumerate(spec):
        j = qa_job(f"j{k}", tenant, agent, float(k), start)
        j.n_in = n_in
        policy.push(j, float(k))
        pending[j.id] = j
        if k == 0:
            policy.tick(1000.0)  # scores from here on
        if pop_now:
            check_one_pop(policy, ctx, pending)
    while pending:
        check_one_pop(policy, ctx, pending)


def check_one_pop(policy: Policy, ctx: PolicyContext, pending: dict[str, Job]) -> None:
    counters = {j.tenant: ctx.ledger.counter((j.tenant,)) for j in pending.values()}
    taken = policy.pop(1000.0, always)
    assert taken is not None
    assert counters[taken.tenant] == min(counters.values())
    mine = [j for j in pending.values() if j.tenant == taken.tenant]
    best = min(mine, key=lambda j: (ctx.workflows.score(j.path), order_key(j)))
    assert taken is best
    del pending[taken.id]
    policy.on_dispatch(taken, 1000.0)
