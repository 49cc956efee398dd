"""QoS views: what the controller perceives, from arrivals and ends of the last window."""

from __future__ import annotations

import pytest

from control_plane.control.views import ViewKeeper
from control_plane.core.job import Outcome, Slo
from control_plane.core.latency import LinearLatency
from tests.control_plane.policies.jobs import job

SLO = Slo(ttft_s=1.0, tpot_s=0.1)


def keeper() -> ViewKeeper:
    return ViewKeeper(LinearLatency(), long_s=10.0, short_s=2.0)


def test_the_long_view_summarises_the_window() -> None:
    v = keeper()
    v.note_queue(0.0, 0)
    for k in range(10):
        v.on_arrival(job(f"a{k}", "a", n_in=100, max_tokens=50, slo=SLO), float(k))
    v.on_arrival(job("b0", "b", n_in=4000, max_tokens=2000, slo=SLO), 9.0)
    for k in range(4):
        ok = Outcome("ok", 100, 50, ttft_s=0.5 if k else 3.0, tpot_s=0.05)
        v.on_finish(job(f"a{k}", "a", slo=SLO), ok, 5.0 + k)
    view = v.long(10.0, queued=7)
    assert view.arrival_rps == pytest.approx(10 / 10.0)  # (0, 10]: the arrival at 0 has left
    assert view.completion_rps == pytest.approx(0.4) and view.goodput_rps == pytest.approx(0.3)
    assert view.violation_rate == pytest.approx(0.25) and view.ttft_miss_rate == 0.25
    assert view.tpot_miss_rate == 0.0 and view.slo_share == 1.0
    assert view.tenants == 2 and view.long_fraction == pytest.approx(1 / 10)
    assert view.jain_service < 0.8  # a got 4 of 9 served, b none of 1
    assert view.queue_growth_rps == pytest.approx(0.7)
    assert view.to_json()["queued"] == 7


def test_old_events_leave_the_window_and_the_short_view_is_recent() -> None:
    v = keeper()
    v.on_arrival(job("x", slo=SLO), 0.0)
    v.on_finish(job("x", slo=SLO), Outcome("error", 1, 0), 0.5)
    assert v.short(1.0, 0, 0).violation_rate == 1.0
    assert v.short(3.0, 0, 0).completions == 0
    later = v.long(20.0, 0)
    assert later.arrival_rps == 0.0 and later.completion_rps == 0.0 and later.jain_service == 1.0
