"""FCFS, priority, EDF, SJF, LLF and RR orderings (docs/algorithms.md §5–§11)."""

from __future__ import annotations

import math

import pytest

from control_plane.core.job import Slo
from control_plane.core.latency import LinearLatency, deadline, total_time
from control_plane.core.policy import PolicyContext
from control_plane.policies.registry import build_policy
from tests.control_plane.policies.jobs import always, drain, job


def test_fcfs_orders_by_arrival_then_seq_then_id() -> None:
    policy = build_policy("fcfs", PolicyContext())
    policy.push(job("c", arrival=2.0, seq=0), 2.0)
    policy.push(job("b", arrival=1.0, seq=5), 2.0)
    policy.push(job("a", arrival=1.0, seq=4), 2.0)
    policy.push(job("z", arrival=1.0, seq=4), 2.0)
    assert drain(policy) == ["a", "z", "b", "c"]


def test_priority_serves_lower_tiers_first_and_fcfs_within_a_tier() -> None:
    policy = build_policy("priority", PolicyContext())
    for name, tier, arrival in [("b0", 1, 0.0), ("a1", 0, 1.0), ("a0", 0, 0.5), ("c", 2, 0.0)]:
        policy.push(job(name, arrival=arrival, tier=tier), 1.0)
    assert drain(policy) == ["a0", "a1", "b0", "c"]


def test_deadline_is_the_tighter_target_and_infinite_without_one() -> None:
    j = job("x", arrival=10.0, slo=Slo(ttft_s=1.0, tpot_s=0.1), max_tokens=50)
    assert deadline(j) == pytest.approx(10.0 + 1.0 + 0.1 * 50)
    both = job("y", arrival=10.0, slo=Slo(ttft_s=1.0, tpot_s=0.1, e2e_s=3.0), max_tokens=50)
    assert deadline(both) == 13.0
    predicted = job("p", arrival=0.0, slo=Slo(ttft_s=1.0, tpot_s=0.1), predicted_out=10)
    assert deadline(predicted) == pytest.approx(2.0)
    assert deadline(job("n", arrival=4.0)) == math.inf
    assert deadline(job("n", arrival=4.0), default_s=6.0) == 10.0


def test_edf_orders_by_deadline_and_puts_jobs_without_one_last() -> None:
    policy = build_policy("edf", PolicyContext())
    policy.push(job("none", arrival=0.0), 0.0)
    policy.push(job("late", arrival=0.0, slo=Slo(e2e_s=9.0)), 0.0)
    policy.push(job("soon", arrival=1.0, slo=Slo(e2e_s=2.0)), 1.0)
    assert drain(policy) == ["soon", "late", "none"]
    with_default = build_policy("edf", PolicyContext(), {"default_deadline_s": 1.0})
    with_default.push(job("late", arrival=0.0, slo=Slo(e2e_s=9.0)), 0.0)
    with_default.push(job("none", arrival=0.0), 0.0)
    assert drain(with_default) == ["none", "late"]


def test_sjf_orders_by_predicted_service_time() -> None:
    latency = LinearLatency(a=0.1, b=0.001, c=0.01, d=0.0, running_batch=0.0)
    policy = build_policy("sjf", PolicyContext(latency=latency))
    policy.push(job("long-out", n_in=10, max_tokens=500), 0.0)
    policy.push(job("long-in", n_in=2000, max_tokens=10), 0.0)
    policy.push(job("short", n_in=10, max_tokens=10), 0.0)
    policy.push(job("predicted", n_in=10, max_tokens=500, predicted_out=5), 0.0)
    assert drain(policy) == ["predicted", "short", "long-in", "long-out"]
    assert total_time(job("t", n_in=100, max_tokens=10), latency) == pytest.approx(0.3)


def test_llf_orders_by_slack() -> None:
    latency = LinearLatency(a=0.0, b=0.0, c=0.1, d=0.0, running_batch=0.0)
    policy = build_policy("llf", PolicyContext(latency=latency))
    # deadline 10, T_tot 9 → slack 1;  deadline 5, T_tot 1 → slack 4
    policy.push(job("tight", arrival=0.0, slo=Slo(e2e_s=10.0), max_tokens=90), 0.0)
    policy.push(job("loose", arrival=0.0, slo=Slo(e2e_s=5.0), max_tokens=10), 0.0)
    assert drain(policy) == ["tight", "loose"]


def test_rr_gives_each_backlogged_tenant_one_turn_in_order() -> None:
    policy = build_policy("rr", PolicyContext())
    for name, tenant in [("a1", "a"), ("a2", "a"), ("a3", "a"), ("b1", "b"), ("c1", "c")]:
        policy.push(job(name, tenant), 0.0)
    assert drain(policy) == ["a1", "b1", "c1", "a2", "a3"]


def test_rr_keeps_a_skipped_tenants_turn_and_appends_newcomers() -> None:
    policy = build_policy("rr", PolicyContext())
    policy.push(job("a1", "a", model="big"), 0.0)
    policy.push(job("b1", "b"), 0.0)
    policy.push(job("b2", "b"), 0.0)
    first = policy.pop(0.0, lambda j: j.model != "big")
    assert first is not None and first.id == "b1"
    policy.push(job("c1", "c"), 0.0)
    assert drain(policy) == ["a1", "b2", "c1"]  # a kept its turn; c joined behind b


def test_rr_level_knob_rotates_over_agents() -> None:
    policy = build_policy("rr", PolicyContext(), {"level": 3})
    for name, agent in [("x1", "x"), ("x2", "x"), ("y1", "y")]:
        policy.push(job(name, "t", agent=agent), 0.0)
    assert drain(policy) == ["x1", "y1", "x2"]
    assert policy.pop(0.0, always) is None
