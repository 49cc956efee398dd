"""Two-lane (docs/algorithms.md §8): lanes by T_tot, slack order, reserved fast share."""

from __future__ import annotations

import pytest

from control_plane.core.job import Slo
from control_plane.core.latency import LinearLatency
from control_plane.core.policy import PolicyContext
from control_plane.policies.registry import build_policy
from control_plane.policies.two_lane import TwoLanePolicy
from tests.control_plane.policies.jobs import always, job

LATENCY = LinearLatency(a=0.0, b=0.0, c=0.01, d=0.0, running_batch=0.0)  # T_tot = 0.01 · out


def lanes(share: float, threshold: float | None = None) -> TwoLanePolicy:
    params: dict[str, float] = {"fast_share": share}
    if threshold is not None:
        params["threshold_s"] = threshold
    policy = build_policy("two_lane", PolicyContext(latency=LATENCY), params)
    assert isinstance(policy, TwoLanePolicy)
    return policy


@pytest.mark.parametrize("share", [0.5, 0.25, 0.8])
def test_contested_slots_follow_the_reserved_share(share: float) -> None:
    policy = lanes(share, threshold=1.0)
    for i in range(400):
        policy.push(job(f"f{i}", max_tokens=10), 0.0)  # 0.1 s: fast
        policy.push(job(f"s{i}", max_tokens=1000), 0.0)  # 10 s: slow
    picks = []
    for _ in range(200):
        popped = policy.pop(0.0, always)
        assert popped is not None
        picks.append(popped.id[0])
    assert abs(picks.count("f") - share * 200) <= 1


def test_a_lane_with_nothing_admissible_lends_its_slot() -> None:
    policy = lanes(0.5, threshold=1.0)
    for i in range(3):
        policy.push(job(f"f{i}", max_tokens=10), 0.0)
        policy.push(job(f"s{i}", max_tokens=1000, model="other"), 0.0)
    picks = [policy.pop(0.0, lambda j: j.model == "default") for _ in range(4)]
    assert [p.id if p else None for p in picks] == ["f0", "f1", "f2", None]


def test_within_a_lane_least_slack_first() -> None:
    policy = lanes(1.0, threshold=1.0)
    policy.push(job("relaxed", max_tokens=10, slo=Slo(e2e_s=100.0)), 0.0)
    policy.push(job("urgent", max_tokens=10, slo=Slo(e2e_s=1.0)), 0.0)
    policy.push(job("no-slo", max_tokens=10), 0.0)
    assert [policy.pop(0.0, always).id for _ in range(3)] == ["urgent", "relaxed", "no-slo"]  # type: ignore[union-attr]


def test_default_threshold_is_the_running_median() -> None:
    policy = lanes(0.5)
    # T_tot .4 .1 10 .2 .3 against the median of everything pushed so far, itself included:
    # .4 ≤ .4, .1 ≤ .25, 10 > .4, .2 ≤ .3, .3 ≤ .3.
    for i, out in enumerate([40, 10, 1000, 20, 30]):
        policy.push(job(f"j{i}", max_tokens=out), 0.0)
    assert policy.threshold() == pytest.approx(0.3)
    state = policy.state()
    assert set(state["fast"]) == {"j0", "j1", "j3", "j4"} and state["slow"] == ["j2"]
