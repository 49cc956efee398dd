"""Arrival processes and length distributions: rates, burstiness, windows, determinism."""

from __future__ import annotations

import itertools
import random
import statistics

import pytest

from control_plane.sim.arrivals import Gamma, OnOff, Piecewise, Poisson
from control_plane.sim.distributions import Empirical, Fixed, LogNormal, Normal, Uniform


def gaps(times: list[float]) -> list[float]:
    return [b - a for a, b in itertools.pairwise(times)]


def test_poisson_rate_and_window() -> None:
    times = Poisson(rate_per_min=600, start_s=10, stop_s=1010).times(random.Random(1), 2000, 1)
    assert all(10 <= t < 1010 for t in times) and times == sorted(times)
    assert len(times) == pytest.approx(10_000, rel=0.03)
    cv = statistics.pstdev(gaps(times)) / statistics.mean(gaps(times))
    assert cv == pytest.approx(1.0, abs=0.05)


def test_load_scale_multiplies_the_rate() -> None:
    base = Poisson(rate=5).times(random.Random(2), 1000, 1.0)
    doubled = Poisson(rate=5).times(random.Random(2), 1000, 2.0)
    assert len(doubled) == pytest.approx(2 * len(base), rel=0.05)


def test_gamma_has_the_requested_cv() -> None:
    times = Gamma(rate=20, cv=3).times(random.Random(3), 3000, 1)
    g = gaps(times)
    assert len(times) == pytest.approx(60_000, rel=0.05)
    assert statistics.pstdev(g) / statistics.mean(g) == pytest.approx(3.0, rel=0.1)


def test_on_off_is_silent_while_off() -> None:
    proc = OnOff(rate=10, on_s=60, off_s=40)
    times = proc.times(random.Random(4), 1000, 1)
    assert all((t % 100) < 60 for t in times)
    assert len(times) == pytest.approx(6000, rel=0.05)
    assert proc.mean_rate(1000) == pytest.approx(6.0)


def test_piecewise_segments_and_cycles() -> None:
    proc = Piecewise.model_validate(
        {
            "unit_rate": 10,
            "segments": [
                {"until_s": 100, "rate": 0.5},
                {
                    "until_s": 300,
                    "cycle": [{"duration_s": 10, "rate": 2.0}, {"duration_s": 10, "rate": 0.0}],
                },
            ],
        }
    )
    times = proc.times(random.Random(5), 300, 1)
    first = [t for t in times if t < 100]
    second = [t for t in times if t >= 100]
    assert len(first) == pytest.approx(500, rel=0.15)
    assert len(second) == pytest.approx(2000, rel=0.1)
    assert all(((t - 100) % 20) < 10 for t in second)
    assert proc.mean_rate(300) == pytest.approx(2500 / 300)


def test_piecewise_segments_must_increase() -> None:
    with pytest.raises(ValueError, match="increase"):
        Piecewise.model_validate(
            {"segments": [{"until_s": 10, "rate": 1}, {"until_s": 5, "rate": 1}]}
        )


def test_length_distributions() -> None:
    rng = random.Random(6)
    assert Fixed(value=7).sample(rng) == 7
    assert all(3 <= Uniform(low=3, high=9).sample(rng) <= 9 for _ in range(200))
    normal = [Normal.model_validate({"mean": 100, "std": 10}).sample(rng) for _ in range(4000)]
    assert statistics.mean(normal) == pytest.approx(100, rel=0.02)
    log = [LogNormal.model_validate({"mean": 200, "sigma": 0.8}).sample(rng) for _ in range(20000)]
    assert statistics.mean(log) == pytest.approx(200, rel=0.05)
    assert {Empirical(values=[1, 5]).sample(rng) for _ in range(50)} == {1, 5}
    clipped = Uniform(low=1, high=1000, min=10, max=20)
    assert all(10 <= clipped.sample(rng) <= 20 for _ in range(100))
