"""VTC specifics (docs/algorithms.md §1): lifts, weights, charges, switches."""

from __future__ import annotations

from control_plane.core.ledger import Ledger
from control_plane.core.policy import PolicyContext, Weights, switch_policy
from control_plane.policies.registry import build_policy
from tests.control_plane.policies.jobs import always, drain, job


def test_smallest_counter_first_with_fcfs_ties() -> None:
    policy = build_policy("vtc", PolicyContext())
    for name, tenant in [("a1", "a"), ("a2", "a"), ("b1", "b"), ("c1", "c")]:
        policy.push(job(name, tenant, n_in=10), 0.0)
    assert drain(policy, dispatch=True) == ["a1", "b1", "c1", "a2"]


def test_input_on_dispatch_output_per_token_divided_by_weight() -> None:
    weights = Weights()
    weights.set(("a",), 2.0)
    ctx = PolicyContext(weights=weights)
    policy = build_policy("vtc", ctx)
    j = job("x", "a", n_in=10, unit_factor=1.5)
    policy.push(j, 0.0)
    assert policy.pop(0.0, always) is j
    assert ctx.ledger.counter(("a",)) == 0.0  # nothing before dispatch
    policy.on_dispatch(j, 0.0)
    assert ctx.ledger.counter(("a",)) == 10 * 1.5 / 2
    policy.on_tokens(j, 4, 0.1)
    assert ctx.ledger.counter(("a",)) == (10 + 2 * 4) * 1.5 / 2


def test_raw_cost_unit_ignores_the_unified_factor() -> None:
    ctx = PolicyContext()
    policy = build_policy("vtc", ctx, {"cost_unit": "raw"})
    j = job("x", "a", n_in=10, unit_factor=4.0)
    policy.push(j, 0.0)
    policy.pop(0.0, always)
    policy.on_dispatch(j, 0.0)
    assert ctx.ledger.counter(("a",)) == 10.0


def test_a_returning_client_is_lifted_to_the_smallest_backlogged_counter() -> None:
    ctx = PolicyContext()
    policy = build_policy("vtc", ctx)
    policy.push(job("b1", "busy1"), 0.0)
    policy.push(job("b2", "busy2"), 0.0)
    ctx.ledger.add_counter(("busy1",), 100.0)  # as if both had been served meanwhile
    ctx.ledger.add_counter(("busy2",), 80.0)
    policy.push(job("i1", "idle"), 0.0)
    assert ctx.ledger.counter(("idle",)) == 80.0  # no credit banked while idle
    policy.push(job("i2", "idle"), 0.0)  # already backlogged: no new lift
    assert ctx.ledger.counter(("idle",)) == 80.0
    ctx.ledger.add_counter(("rich",), 500.0)
    policy.push(job("r1", "rich"), 0.0)
    assert ctx.ledger.counter(("rich",)) == 500.0  # lifts never lower a counter


def test_with_an_empty_queue_the_lift_is_to_the_client_served_last() -> None:
    ctx = PolicyContext()
    policy = build_policy("vtc", ctx)
    policy.push(job("a1", "a", n_in=50), 0.0)
    first = policy.pop(0.0, always)
    assert first is not None
    policy.on_dispatch(first, 0.0)
    policy.on_tokens(first, 10, 1.0)  # a's counter keeps growing after it left: 50 + 20
    policy.push(job("b1", "b"), 2.0)
    assert ctx.ledger.counter(("b",)) == 70.0


def test_pop_skips_an_inadmissible_head_for_the_next_best_job() -> None:
    policy = build_policy("vtc", PolicyContext())
    policy.push(job("a1", "a", model="m1"), 0.0)
    policy.push(job("a2", "a", model="m2"), 0.0)
    policy.push(job("b1", "b", model="m1"), 0.0)
    only_m2 = policy.pop(0.0, lambda j: j.model == "m2")
    assert only_m2 is not None and only_m2.id == "a2"
    assert policy.pop(0.0, lambda j: j.model == "m3") is None
    assert drain(policy) == ["a1", "b1"]


def test_client_level_knob_makes_agents_the_clients() -> None:
    policy = build_policy("vtc", PolicyContext(), {"level": 3})
    policy.push(job("x1", "t", agent="x"), 0.0)
    policy.push(job("x2", "t", agent="x"), 0.0)
    policy.push(job("y1", "t", agent="y"), 0.0)
    assert drain(policy, dispatch=True) == ["x1", "y1", "x2"]


def test_a_switch_keeps_counters_and_lifts_only_newcomers() -> None:
    ctx = PolicyContext(ledger=Ledger())
    vtc = build_policy("vtc", ctx)
    for i in range(3):
        vtc.push(job(f"a{i}", "a", n_in=100), 0.0)
        vtc.push(job(f"b{i}", "b", n_in=10), 0.0)
    for _ in range(2):
        popped = vtc.pop(0.0, always)
        assert popped is not None
        vtc.on_dispatch(popped, 0.0)
    counters = {c: ctx.ledger.counter((c,)) for c in "ab"}
    fcfs = switch_policy(vtc, build_policy("fcfs", ctx), 1.0)
    fcfs.push(job("n1", "new"), 2.0)  # arrives while FCFS runs: counter 0
    back = switch_policy(fcfs, build_policy("wfq", ctx), 3.0)
    assert {c: ctx.ledger.counter((c,)) for c in "ab"} == counters
    assert ctx.ledger.counter(("new",)) == min(counters.values())
    assert len(back) == 5
