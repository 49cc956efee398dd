"""Offered load and queue waits per node over the sliding window."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from control_plane.core.live_windows import LiveWindows, WaitWindow


@given(st.lists(st.floats(min_value=0.0, max_value=3600.0), min_size=1, max_size=200))
def test_wait_quantile_is_within_ten_percent_above(waits: list[float]) -> None:
    window = WaitWindow(60.0, 1.0)
    for w in waits:
        window.add(100.0, w)
    ordered = sorted(waits)
    true = ordered[max(0, -(-95 * len(ordered) // 100) - 1)]
    got = window.quantile(100.0, 0.95)
    assert got is not None and got >= true - 1e-12
    assert got <= max(true * 1.1, 0.01) + 1e-9


def test_demand_and_waits_roll_out_of_the_window_per_level() -> None:
    live = LiveWindows(window_s=60.0, bucket_s=1.0)
    live.arrived(("a", "chat", "x"), 10.0, 120.0)
    live.arrived(("a", "chat", "y"), 10.5, 60.0)
    live.dispatched(("a", "chat", "x"), 11.0, 4.0)
    assert live.demand_rate(("a",), 20.0) == pytest.approx(3.0)
    assert live.demand_rate(("a", "chat", "y"), 20.0) == pytest.approx(1.0)
    assert live.wait_p95(("a", "chat"), 20.0) == pytest.approx(4.0, rel=0.1)
    assert live.wait_p95(("a", "chat", "y"), 20.0) is None
    assert live.demand_rate(("a",), 80.0) == 0.0 and live.wait_p95(("a",), 80.0) is None
    live.prune(80.0)
    assert not set(live.nodes())  # bounded: idle nodes are forgotten
