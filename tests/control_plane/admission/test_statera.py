"""Statera admission (docs/algorithms.md §12.2, §12.3): conformal bound, KV fence, dual loop."""

from __future__ import annotations

import json
import random

import pytest

from control_plane.admission.conformal import ConformalLengthBound
from control_plane.admission.registry import build_admission
from control_plane.admission.statera import StateraAdmission
from control_plane.core.job import Outcome
from control_plane.core.worker_view import WorkerView
from tests.control_plane.policies.jobs import job


def statera(**params: object) -> StateraAdmission:
    admission = build_admission("statera", dict(params))
    assert isinstance(admission, StateraAdmission)
    return admission


def worker(**fields: object) -> WorkerView:
    base: dict[str, object] = {"id": "w", "model": "m", "max_num_seqs": 64, "kv_tokens": 10_000}
    return WorkerView(**(base | fields))  # type: ignore[arg-type]


def test_without_enough_samples_the_bound_is_max_tokens() -> None:
    bound = ConformalLengthBound(epsilon=0.05)
    j = job("x", n_in=100, max_tokens=500, predicted_out=50)
    for _ in range(18):  # ⌈(18+1)·0.95⌉ = 19 > 18 samples
        bound.observe(100, 50, 60)
    assert bound.upper(j) == 500
    bound.observe(100, 50, 60)  # 19 samples: rank 19 exists
    assert bound.upper(j) == 60
    assert bound.upper(job("y", n_in=5000, max_tokens=500, predicted_out=50)) == 500


def test_conformal_bound_covers_new_lengths_with_probability_one_minus_epsilon() -> None:
    rng = random.Random(7)
    bound = ConformalLengthBound(epsilon=0.1, window=400)
    for _ in range(400):
        bound.observe(200, 100, int(rng.expovariate(1 / 100)))
    j = job("x", n_in=200, max_tokens=10_000, predicted_out=100)
    upper = bound.upper(j)
    trials = [int(rng.expovariate(1 / 100)) for _ in range(20_000)]
    coverage = sum(t <= upper for t in trials) / len(trials)
    assert 0.87 <= coverage <= 0.95


def test_online_coverage_is_counted_against_the_bound_before_each_answer() -> None:
    rng = random.Random(3)
    bound = ConformalLengthBound(epsilon=0.05, window=500)
    for _ in range(18):
        bound.observe(200, 100, 100)  # too few for a bound: nothing scored
    assert bound.coverage()["scored"] == 0
    for _ in range(5000):
        bound.observe(200, 100, int(rng.expovariate(1 / 100)))
    cov = bound.coverage()
    assert cov["scored"] >= 4990 and cov["target"] == pytest.approx(0.95)
    assert 0.93 <= cov["rate"] <= 0.97  # exchangeable errors: about 1 − ε


def test_fence_reserves_prompt_plus_upper_bound_under_the_budget() -> None:
    admission = statera(delta_frag=0.1)
    j = job("x", n_in=1000, max_tokens=4000)
    assert admission.reserve(j) == 5000  # uncalibrated: max_tokens
    busy = worker(inflight=1, inflight_tokens=4000)  # fence 9000
    assert admission.admit(j, busy, 0.0)
    assert not admission.admit(j, worker(inflight=1, inflight_tokens=4001), 0.0)
    assert admission.admit(job("huge", n_in=50_000, max_tokens=1), worker(), 0.0)  # idle


def test_dual_loop_shrinks_under_overload_and_grows_back_within_bounds() -> None:
    admission = statera(period_s=1.0, window=2, eta_b=0.5, eta_n=100.0, n_min=4, n_max=64)
    hot = [worker(kv_usage=1.0)]
    for t in range(40):
        admission.observe(float(t), hot)
    assert admission.budget == pytest.approx(0.3) and admission.n_run == 4
    assert not admission.has_room(worker(inflight=4, inflight_tokens=10), 100.0)
    admission.observe(39.5, [worker(kv_usage=0.0)])  # within the period: ignored
    assert admission.budget == pytest.approx(0.3)
    for t in range(41, 80):
        admission.observe(float(t), [worker(kv_usage=0.0)])
    assert admission.budget == 1.0 and admission.n_run == 64
    in_band = statera(period_s=1.0)
    for t in range(10):
        in_band.observe(float(t), [worker(kv_usage=0.8)])
    assert (in_band.budget, in_band.n_run) == (1.0, 256.0)


def test_learns_from_completions_and_snapshots_to_json() -> None:
    admission = statera(period_s=1.0)
    for i in range(30):
        j = job(f"j{i}", n_in=100, max_tokens=1000, predicted_out=100)
        admission.on_finish(j, Outcome("ok", 100, 120), float(i))
    admission.on_finish(job("e", n_in=100, predicted_out=100), Outcome("error", 100, 999), 0.0)
    assert admission.bound.upper(job("n", n_in=100, max_tokens=1000, predicted_out=100)) == 120
    admission.observe(0.0, [worker(kv_usage=1.0)])
    state = json.loads(json.dumps(admission.snapshot()))
    again = statera(period_s=1.0)
    again.restore(state)
    assert json.loads(json.dumps(again.snapshot())) == state
    assert again.bound.upper(job("n", n_in=100, max_tokens=1000, predicted_out=100)) == 120


def test_inconsistent_bounds_are_rejected() -> None:
    with pytest.raises(ValueError):
        statera(u_low=0.9, u_high=0.7)


def drifting(gamma: float, seed: int) -> float:
    """Online coverage while real lengths grow from 1× to 4× the prediction's scale."""
    rng = random.Random(seed)
    bound = ConformalLengthBound(epsilon=0.05, window=500, gamma=gamma)
    n = 8000
    for i in range(n):
        bound.observe(200, 100, int(rng.expovariate(1 / (100 + 300 * i / n))))
    rate = bound.coverage()["rate"]
    assert isinstance(rate, float)
    return rate


def test_under_drift_the_adaptive_level_keeps_coverage_where_the_fixed_one_falls_short() -> None:
    for seed in (1, 2, 3):
        fixed, adaptive = drifting(0.0, seed), drifting(0.005, seed)
        assert fixed < 0.948  # the window lags the drift: below 1 − ε
        assert adaptive >= 0.949 and adaptive > fixed


def test_the_adapted_levels_survive_a_checkpoint() -> None:
    admission = statera()
    for k in range(300):
        admission.bound.observe(100, 50, 60 if k % 3 else 400)
    snap = admission.snapshot()
    assert snap["length_alpha"]
    again = statera()
    again.restore(snap)
    assert again.bound.alphas() == admission.bound.alphas()
    j = job("x", n_in=100, max_tokens=1000, predicted_out=50)
    assert again.reserve(j) == admission.reserve(j)


def test_a_burst_of_misses_does_not_freeze_the_adaptive_level() -> None:
    bound = ConformalLengthBound(epsilon=0.05, window=500)
    for _ in range(500):
        bound.observe(200, 100, 100)  # calibrated: error 0
    for k in range(200):
        bound.observe(200, 100, 200 + k)  # each answer longer than any before: all miss
    j = job("x", n_in=200, max_tokens=10_000, predicted_out=100)
    assert bound.upper(j) == 10_000  # the level fell so low that the bound is max_tokens…
    for _ in range(4000):
        bound.observe(200, 100, 100)
    assert bound.upper(j) < 10_000  # …and it comes back once answers fit again
