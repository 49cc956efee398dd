"""Weighted max-min fairness (water-filling) and the starved / over-served rule."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from control_plane.core.entitlement import Claim, judge, water_fill

demand = st.floats(min_value=0.0, max_value=1e6, allow_nan=False)
weight = st.floats(min_value=0.01, max_value=100.0, allow_nan=False)
claimants = st.lists(st.tuples(demand, weight), min_size=1, max_size=12)
capacity = st.floats(min_value=0.0, max_value=2e6, allow_nan=False)


@given(claimants, capacity)
def test_water_filling_is_feasible_and_work_conserving(
    pairs: list[tuple[float, float]], cap: float
) -> None:
    demands, weights = [d for d, _ in pairs], [w for _, w in pairs]
    out = water_fill(demands, weights, cap)
    assert all(-1e-9 <= e <= d * (1 + 1e-9) + 1e-9 for e, d in zip(out, demands, strict=True))
    assert sum(out) == pytest.approx(min(cap, sum(demands)), rel=1e-6, abs=1e-6)


@given(claimants, capacity)
def test_water_filling_is_max_min_fair(pairs: list[tuple[float, float]], cap: float) -> None:
    """Whoever gets less than its demand has at least the per-weight share of anyone else."""
    demands, weights = [d for d, _ in pairs], [w for _, w in pairs]
    out = water_fill(demands, weights, cap)
    per_weight = [e / w for e, w in zip(out, weights, strict=True)]
    for i, (e, d) in enumerate(zip(out, demands, strict=True)):
        if e < d * (1 - 1e-9) - 1e-9:
            assert per_weight[i] >= max(per_weight) * (1 - 1e-6) - 1e-9


def test_water_filling_examples() -> None:
    assert water_fill([10, 10], [1, 1], 10) == [5, 5]
    assert water_fill([2, 10], [1, 1], 10) == [2, 8]  # the light one asks less than half
    assert water_fill([10, 10], [3, 1], 8) == [6, 2]
    assert water_fill([1, 2], [1, 1], 10) == [1, 2]  # more than asked: everyone gets demand
    assert water_fill([5], [1], 0) == [0.0]
    with pytest.raises(ValueError, match="weights"):
        water_fill([1], [0], 1)


def test_a_light_tenant_asking_less_is_ok_even_with_a_small_share() -> None:
    heavy = Claim(demand=90, received=90, backlogged=True)
    light = Claim(demand=5, received=5, backlogged=False)
    verdicts = judge([heavy, light])
    assert [v.status for v in verdicts] == ["ok", "ok"]
    assert verdicts[1].entitled == 5 and verdicts[1].received_share == pytest.approx(5 / 95)


def test_a_backlogged_tenant_receiving_much_less_than_entitled_is_starved() -> None:
    heavy = Claim(demand=200, received=95, backlogged=True)
    light = Claim(demand=30, received=5, backlogged=True)
    verdicts = judge([heavy, light])
    assert verdicts[1].entitled == 30 and verdicts[1].status == "starved"
    assert verdicts[0].entitled == 70 and verdicts[0].status == "over-served"
    assert verdicts[0].entitled_share == pytest.approx(0.7)


def test_low_received_without_backlog_is_not_starved_and_within_tolerance_is_ok() -> None:
    assert judge([Claim(50, 90), Claim(50, 10)])[1].status == "ok"  # nothing waits
    within = judge([Claim(50, 54, backlogged=True), Claim(50, 46, backlogged=True)])
    assert [v.status for v in within] == ["ok", "ok"]
    weighted = judge([Claim(100, 75, 3.0, True), Claim(100, 25, 1.0, True)])
    assert [v.status for v in weighted] == ["ok", "ok"]  # 3 : 1 is what the weights say


def test_nothing_received_means_no_shares_and_no_flags() -> None:
    [v] = judge([Claim(10, 0, backlogged=True)])
    assert (v.entitled, v.entitled_share, v.status) == (0.0, None, "ok")
