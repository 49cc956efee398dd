"""Weighted max-min fair entitlement (water-filling) and the Reports page's share chart."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from console.entitlement import entitled_shares, node_demand, water_fill
from console.report_views import jain_figure, share_figure

KEYS = st.lists(st.sampled_from("abcdefgh"), min_size=1, max_size=8, unique=True)
AMOUNT = st.floats(min_value=0.0, max_value=1e6, allow_nan=False)
WEIGHT = st.floats(min_value=0.01, max_value=100.0, allow_nan=False)


@given(KEYS.flatmap(lambda ks: st.tuples(
    st.fixed_dictionaries({k: AMOUNT for k in ks}),
    st.fixed_dictionaries({k: WEIGHT for k in ks}),
    AMOUNT,
)))  # fmt: skip
def test_water_fill_never_exceeds_demand_and_uses_the_capacity(
    case: tuple[dict[str, float], dict[str, float], float],
) -> None:
    demands, weights, capacity = case
    alloc = water_fill(demands, weights, capacity)
    assert set(alloc) == set(demands)
    for key, value in alloc.items():
        assert -1e-9 <= value <= demands[key] * (1 + 1e-9) + 1e-9, key
    used = min(capacity, sum(demands.values()))
    assert sum(alloc.values()) == pytest.approx(used, rel=1e-9, abs=1e-6)


@given(st.integers(min_value=2, max_value=8), AMOUNT, WEIGHT, AMOUNT)
def test_equal_weights_and_equal_demands_get_equal_shares(
    n: int, demand: float, weight: float, capacity: float
) -> None:
    keys = [str(i) for i in range(n)]
    alloc = water_fill(dict.fromkeys(keys, demand), dict.fromkeys(keys, weight), capacity)
    assert max(alloc.values()) == pytest.approx(min(alloc.values()), rel=1e-9, abs=1e-9)


def test_what_a_light_node_leaves_is_split_by_weight() -> None:
    alloc = water_fill({"light": 10.0, "a": 100.0, "b": 100.0}, {"light": 1, "a": 1, "b": 2}, 100)
    assert alloc["light"] == 10.0  # below its third: all it asked
    assert alloc["a"] == pytest.approx(30.0) and alloc["b"] == pytest.approx(60.0)


def test_zero_weights_get_nothing() -> None:
    assert water_fill({"a": 5.0, "b": 5.0}, {"a": 0.0, "b": 1.0}, 8.0) == {"a": 0.0, "b": 5.0}


def _node(key: str, weight: float, service: float, ok: int, failed: int = 0) -> dict[str, object]:
    return {"key": key, "weight": weight, "unified_service": service, "ok": ok,
            "failed": failed, "share": 0.0}  # fmt: skip


def test_a_light_tenant_is_entitled_to_what_it_asked_not_half() -> None:
    # two equal weights; the light tenant asked 10 % of the work and got all of it
    nodes = [_node("light", 1.0, 100.0, 10), _node("heavy", 1.0, 900.0, 90)]
    shares = entitled_shares(nodes)
    assert shares == {"light": pytest.approx(0.1), "heavy": pytest.approx(0.9)}


def test_failed_requests_count_as_unmet_demand() -> None:
    # heavy got 500 for 50 requests and saw 50 fail: it asked for ~1000; light asked 100
    nodes = [_node("light", 1.0, 100.0, 10), _node("heavy", 1.0, 500.0, 50, failed=50)]
    assert node_demand(nodes[1]) == pytest.approx(1000.0)
    shares = entitled_shares(nodes)
    assert shares["light"] == pytest.approx(100 / 600) and shares["heavy"] == pytest.approx(5 / 6)
    assert entitled_shares([_node("idle", 1.0, 0.0, 0)]) == {"idle": 0.0}


def test_the_share_chart_draws_received_beside_demand_aware_entitlement() -> None:
    nodes = [
        {**_node("light", 1.0, 100.0, 10), "share": 0.1},
        {**_node("heavy", 1.0, 900.0, 90), "share": 0.9},
    ]
    received, entitled = share_figure({"nodes": nodes}).data
    assert list(received.y) == [0.1, 0.9]
    assert list(entitled.y) == [pytest.approx(0.1), pytest.approx(0.9)]  # not 0.5 by weight


def test_a_window_without_service_is_a_gap_in_the_jain_chart() -> None:
    series = [
        {"start": 0, "jain_service": 0.5},
        {"start": 60, "jain_service": None},
        {"start": 120, "jain_service": 1.0},
    ]
    (line,) = jain_figure({"series": series, "jain_service": 0.8}).data
    assert list(line.y) == [0.5, None, 1.0] and line.connectgaps is False
