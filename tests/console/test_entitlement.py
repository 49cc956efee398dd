"""Weighted max-min fair entitlement (water-filling, down the hierarchy) and the Reports page's
share chart and table."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from console.entitlement import entitled_shares, hierarchical_fill, node_demand, water_fill
from console.report_views import jain_figure, report_frame, share_figure

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


def _at(
    key: str, path_weights: list[float], service: float, ok: int, failed: int = 0
) -> dict[str, object]:
    """A report node below tenant level, as the API sends it (path and weights along it)."""
    return {
        **_node(key, path_weights[-1], service, ok, failed),
        "path": key.split("/"),
        "path_weights": path_weights,
    }


def test_apps_share_their_tenants_part_not_the_pool() -> None:
    # acme (1) has apps x and y, globex (1) has z (weights 1); each served 100 and saw 30
    # requests fail: all ask 400, more than any share of the 300 delivered
    nodes = [_at(k, [1.0, 1.0], 100.0, 10, failed=30) for k in ("acme/x", "acme/y", "globex/z")]
    shares = entitled_shares(nodes)
    assert shares == {
        "acme/x": pytest.approx(0.25),
        "acme/y": pytest.approx(0.25),
        "globex/z": pytest.approx(0.5),
    }  # not 1/3 each
    _, entitled = share_figure({"nodes": nodes}).data
    assert list(entitled.y) == [pytest.approx(0.25), pytest.approx(0.25), pytest.approx(0.5)]
    assert entitled.name == "entitled given demand"
    frame = report_frame({"nodes": nodes}).set_index("node")
    assert frame.loc["globex/z", "entitled_given_demand"] == pytest.approx(0.5)


def test_what_an_app_leaves_goes_to_its_sibling_before_the_other_tenant() -> None:
    # x asks 10 of acme's 60; y gets the other 50 and z keeps globex's 60 (flat: 55 and 55)
    nodes = [
        _at("acme/x", [1.0, 1.0], 10.0, 1),
        _at("acme/y", [1.0, 1.0], 50.0, 5, failed=5),
        _at("globex/z", [1.0, 1.0], 60.0, 6, failed=4),
    ]
    shares = entitled_shares(nodes)
    assert shares == {
        "acme/x": pytest.approx(10 / 120),
        "acme/y": pytest.approx(50 / 120),
        "globex/z": pytest.approx(60 / 120),
    }


def test_agents_share_their_apps_part() -> None:
    # acme (2): app x (1) with agents a (1) and b (3), app y (1) with c; globex (1): z/d
    nodes = [
        _at("acme/x/a", [2.0, 1.0, 1.0], 100.0, 1, failed=9),
        _at("acme/x/b", [2.0, 1.0, 3.0], 100.0, 1, failed=9),
        _at("acme/y/c", [2.0, 1.0, 1.0], 100.0, 1, failed=9),
        _at("globex/z/d", [1.0, 1.0, 1.0], 100.0, 1, failed=9),
    ]
    shares = entitled_shares(nodes)
    want = {"acme/x/a": 1 / 12, "acme/x/b": 3 / 12, "acme/y/c": 1 / 3, "globex/z/d": 1 / 3}
    assert shares == pytest.approx(want)


def test_tenant_level_is_plain_water_filling() -> None:
    nodes = [
        _at("a", [1.0], 100.0, 10),
        _at("b", [3.0], 500.0, 5, failed=5),
        _at("c", [2.0], 400.0, 8, failed=8),
    ]
    demands = {str(n["key"]): node_demand(n) for n in nodes}
    flat = water_fill(demands, {"a": 1.0, "b": 3.0, "c": 2.0}, 1000.0)
    assert entitled_shares(nodes) == {k: pytest.approx(v / 1000) for k, v in flat.items()}
    without = [{k: v for k, v in n.items() if k not in ("path", "path_weights")} for n in nodes]
    assert entitled_shares(without) == entitled_shares(nodes)  # an API without path_weights


PATHS = st.lists(st.tuples(st.sampled_from("ab"), st.sampled_from("xyz"), st.sampled_from("pq")),
                 min_size=1, max_size=12, unique=True)  # fmt: skip


@given(PATHS.flatmap(lambda ps: st.tuples(
    st.fixed_dictionaries({p: AMOUNT for p in ps}),
    st.fixed_dictionaries({p[:i]: WEIGHT for p in ps for i in (1, 2, 3)}),
    AMOUNT,
)))  # fmt: skip
def test_hierarchical_fill_never_exceeds_demand_and_uses_the_capacity(
    case: tuple[dict[tuple[str, ...], float], dict[tuple[str, ...], float], float],
) -> None:
    demands, weights, capacity = case
    alloc = hierarchical_fill(demands, weights, capacity)
    assert set(alloc) == set(demands)
    for path, value in alloc.items():
        assert -1e-9 <= value <= demands[path] * (1 + 1e-9) + 1e-6, path
    used = min(capacity, sum(demands.values()))
    assert sum(alloc.values()) == pytest.approx(used, rel=1e-9, abs=1e-6)


def test_a_window_without_service_is_a_gap_in_the_jain_chart() -> None:
    series = [
        {"start": 0, "jain_service": 0.5},
        {"start": 60, "jain_service": None},
        {"start": 120, "jain_service": 1.0},
    ]
    (line,) = jain_figure({"series": series, "jain_service": 0.8}).data
    assert list(line.y) == [0.5, None, 1.0] and line.connectgaps is False
