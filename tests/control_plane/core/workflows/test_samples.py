"""Convergence: checked each time the sample count doubles, by Wasserstein over the mean."""

from __future__ import annotations

import numpy as np

from control_plane.core.workflows.samples import FIRST_CHECK, Samples


def test_a_stationary_distribution_converges_and_a_shifted_one_unconverges() -> None:
    rng = np.random.default_rng(0)
    samples = Samples(window=512)
    for v in rng.normal(10.0, 1.0, 2048):
        samples.add(float(v))
    assert samples.converged and samples.distance is not None and samples.distance < 0.05
    for v in rng.normal(30.0, 1.0, 512):  # the workload changed: noticed within a window
        samples.add(float(v))
    assert not samples.converged
    for v in rng.normal(30.0, 1.0, 1024):  # and the new one converges in turn
        samples.add(float(v))
    assert samples.converged


def test_no_verdict_before_the_count_has_doubled_once() -> None:
    samples = Samples()
    for _ in range(FIRST_CHECK * 2 - 1):
        samples.add(1.0)
    assert samples.distance is None and not samples.converged
    samples.add(1.0)  # 16 = 2 x 8: the first comparison
    assert samples.distance == 0.0 and samples.converged


def test_the_window_is_bounded_and_the_checkpoint_small() -> None:
    samples = Samples(window=100)
    for k in range(10_000):
        samples.add(float(k % 7))
    assert len(samples.values) == 100
    data = samples.to_json()
    assert len(data["values"]) <= 32
    back = Samples.from_json(data, 100, 0.05)
    assert back.seen == 10_000 and back.converged == samples.converged
