"""HMFS specifics (docs/algorithms.md §3): sibling lifts at every level, path charges."""

from __future__ import annotations

from control_plane.core.ledger import Ledger
from control_plane.core.policy import PolicyContext, Weights
from control_plane.policies.registry import build_policy
from tests.control_plane.policies.jobs import always, drain, job


def test_descends_by_least_counter_at_every_level() -> None:
    ctx = PolicyContext()
    policy = build_policy("hmfs", ctx)
    ctx.ledger.add_counter(("t1",), 5.0)
    ctx.ledger.add_counter(("t2", "a", "slow"), 9.0)
    policy.push(job("slow", "t2", app="a", agent="slow", seq=1), 0.0)
    policy.push(job("fast", "t2", app="a", agent="fast", seq=2), 0.0)
    policy.push(job("t1", "t1", app="a", agent="g", seq=0), 0.0)
    # `fast` joined while its sibling `slow` (9) was queued: lifted to 9; t1 kept its 5.
    assert ctx.ledger.counter(("t2", "a", "fast")) == 9.0
    assert ctx.ledger.counter(("t1",)) == 5.0
    # t2 (0) before t1 (5); in t2/a the agents tie at 9 and `slow` has the earlier head;
    # its 10 input tokens take t2 to 10, past t1, whose turn comes before `fast`.
    assert drain(policy, dispatch=True) == ["slow", "t1", "fast"]


def test_charges_every_node_of_the_path_by_its_own_weight() -> None:
    weights = Weights()
    weights.set(("t",), 2.0)
    weights.set(("t", "a"), 4.0)
    ctx = PolicyContext(weights=weights)
    policy = build_policy("hmfs", ctx)
    j = job("x", "t", app="a", agent="g", n_in=8)
    policy.push(j, 0.0)
    assert policy.pop(0.0, always) is j
    policy.on_dispatch(j, 0.0)
    policy.on_tokens(j, 2, 0.0)
    assert ctx.ledger.counter(("t",)) == 12 / 2
    assert ctx.ledger.counter(("t", "a")) == 12 / 4
    assert ctx.ledger.counter(("t", "a", "g")) == 12.0


def test_depth_knob_stops_the_hierarchy_early() -> None:
    ctx = PolicyContext()
    policy = build_policy("hmfs", ctx, {"depth": 2})
    policy.push(job("x1", "t", app="a", agent="x"), 0.0)
    policy.push(job("y1", "t", app="a", agent="y"), 0.0)
    assert drain(policy, dispatch=True) == ["x1", "y1"]  # agents are not separate clients
    assert ctx.ledger.counter(("t", "a", "x")) == 0.0


def test_removal_and_adoption_keep_the_tree_consistent() -> None:
    ctx = PolicyContext(ledger=Ledger())
    policy = build_policy("hmfs", ctx)
    for i, (t, g) in enumerate([("t1", "g1"), ("t1", "g2"), ("t2", "g1")]):
        policy.push(job(f"j{i}", t, agent=g), 0.0)
    assert policy.remove("j1") is not None and policy.remove("j1") is None
    assert not ctx.ledger.is_backlogged(("t1", "app", "g2"))
    assert ctx.ledger.is_backlogged(("t1", "app", "g1"))
    other = build_policy("hmfs", ctx)
    other.adopt(list(policy.jobs()), 1.0)
    assert sorted(drain(other)) == ["j0", "j2"]
    assert len(other) == 0 and not ctx.ledger.is_backlogged(("t1",))
