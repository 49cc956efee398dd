"""Metric functions on hand-computed examples."""

from __future__ import annotations

import numpy as np
import pytest

from control_plane.core.job import Slo
from control_plane.sim.fairness_metrics import esg, esg_value, jain, safi, violation_rate
from control_plane.sim.metrics import group_metrics
from control_plane.sim.percentiles import cdf_points, summary
from control_plane.sim.records import RequestRecord
from control_plane.sim.timeseries import ramp_cumulative, timeseries


def rec(
    tenant: str = "a",
    *,
    n_in: int = 100,
    n_out: int = 50,
    slo: Slo | None = None,
    times: tuple[float, float, float, float] | None = (0.0, 1.0, 2.0, 12.0),
    status: str = "ok",
) -> RequestRecord:
    """arrival, dispatched, first token, finished."""
    r = RequestRecord("r", tenant, "app", "agent", "m", None, 0.0, n_in, n_out, slo or Slo())
    r.status = status
    if times is not None:
        r.arrival, r.dispatched, r.first_token, r.finished = times
        r.n_out = n_out
    return r


def test_jain() -> None:
    assert jain([1, 1, 1, 1]) == 1.0
    assert jain([1, 0, 0, 0]) == 0.25
    assert jain([1, 2, 3]) == pytest.approx(36 / 42)
    assert jain([]) == 1.0 and jain([0, 0]) == 1.0


def test_safi() -> None:
    scores = safi({"a": 0.5, "b": 0.0}, {"a": 100.0, "b": 50.0})
    assert scores == pytest.approx({"a": 0.7 * 0.5 + 0.3 * 1.0, "b": 0.3 * 0.5})
    assert safi({"a": 1.0}, {"a": 0.0}) == {"a": 0.7}  # nobody served: usage 0
    assert safi({"a": 0.2}, {"a": 10.0}, alpha=1.0) == {"a": 0.2}


def test_esg_per_request() -> None:
    # V = 1·100 + 2·50 = 200; TTLT = 12 s (arrival 0, finished 12)
    assert esg_value(rec(slo=Slo(e2e_s=6.0))) == pytest.approx(100.0)
    assert esg_value(rec(slo=Slo(e2e_s=30.0))) == pytest.approx(200.0)
    assert esg_value(rec()) == pytest.approx(200.0)  # no target: full value
    # SLO_ttlt = 1 + 50·0.1 = 6 s
    assert esg_value(rec(slo=Slo(ttft_s=1.0, tpot_s=0.1))) == pytest.approx(100.0)
    assert esg_value(rec(slo=Slo(e2e_s=6.0)), alpha=2.0) == pytest.approx(50.0)
    assert esg_value(rec(slo=Slo(e2e_s=6.0), status="timeout", times=None)) == 0.0
    assert esg([rec(slo=Slo(e2e_s=6.0)), rec()]) == pytest.approx(300.0)


def test_request_latencies_and_violations() -> None:
    r = rec(slo=Slo(ttft_s=1.5, tpot_s=0.25))
    assert (r.queue_s, r.ttft_s, r.e2e_s) == (1.0, 2.0, 12.0)
    assert r.tpot_s == pytest.approx(10.0 / 49)
    assert r.violated()  # TTFT 2 s > 1.5 s
    assert not rec(slo=Slo(e2e_s=12.0)).violated()
    assert rec(slo=Slo(e2e_s=12.0), status="withdrawn", times=None).violated()
    assert not rec(status="withdrawn", times=None).violated()  # no targets, no violation
    records = [rec(slo=Slo(e2e_s=5)), rec(slo=Slo(e2e_s=50)), rec(), rec(slo=Slo(e2e_s=1))]
    assert violation_rate(records) == 0.5


def test_percentiles_use_linear_interpolation() -> None:
    out = summary([*(float(x) for x in range(1, 101)), None], "e2e")
    assert out == pytest.approx(
        {"e2e_mean_s": 50.5, "e2e_p50_s": 50.5, "e2e_p90_s": 90.1, "e2e_p99_s": 99.01}
    )
    assert summary([], "ttft")["ttft_p99_s"] is None
    assert cdf_points([3.0, 1.0, 2.0], points=3) == [1.0, 2.0, 3.0]


def test_ramp_cumulative_spreads_amounts_over_their_interval() -> None:
    start = np.array([0.0, 3.0, 10.0])
    end = np.array([10.0, 3.0, 20.0])
    amount = np.array([10.0, 4.0, 5.0])
    at = np.array([0.0, 2.0, 3.0, 5.0, 10.0, 15.0, 30.0])
    assert ramp_cumulative(start, end, amount, at) == pytest.approx(
        [0.0, 2.0, 7.0, 9.0, 14.0, 16.5, 19.0]
    )


def test_group_metrics_rates_over_the_window() -> None:
    # 50 output tokens streamed evenly from t=2 to t=12: 25 fall in [0, 7]
    m = group_metrics([rec(slo=Slo(e2e_s=20))], 0.0, 7.0)
    assert m["tokens_per_s"] == pytest.approx(25 / 7)
    assert m["goodput_rps"] == pytest.approx(1 / 7)
    assert m["service"] == pytest.approx(200.0)
    assert m["completed"] == 1 and m["slo_violation_rate"] == 0.0
    assert m["ttft_compliance"] is None


def test_timeseries_places_service_and_queues_in_bins() -> None:
    a = rec("a", times=(0.0, 1.0, 2.0, 12.0))  # prompt 100 at t=1, output 2·50 over [2, 12]
    b = rec("b", times=(5.0, 15.0, 16.0, 16.0))  # queued 5..15, prompt 100 + output 100 at 16
    ts = timeseries([a, b], ["a", "b"], {"a": 1.0, "b": 1.0}, end=20.0, bin_s=10.0)
    assert ts["t"] == [10.0, 20.0]
    assert ts["service"]["a"] == pytest.approx([100 + 80, 20])
    assert ts["service"]["b"] == pytest.approx([0, 200])
    assert ts["queued"]["b"] == [1, 0]
    assert ts["tokens_per_s"] == pytest.approx([4.0, 6.0])
    # bin 1: b is queued but unserved, so both are active: Jain([180, 0]) = 0.5
    assert ts["jain_service"] == pytest.approx([0.5, 220**2 / (2 * (20**2 + 200**2))])
