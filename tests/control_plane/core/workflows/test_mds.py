"""Agent priority by classical MDS of Wasserstein distances, oriented by the zero anchor."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from control_plane.core.workflows.mds import agent_scores, classical_mds_1d


def test_mds_recovers_points_on_a_line() -> None:
    x = np.array([0.0, 1.0, 3.0, 7.0])
    coords = classical_mds_1d(np.abs(x[:, None] - x[None, :]))
    assert np.allclose(np.abs(coords - coords[0]), x)


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    shifts=st.lists(st.floats(0.0, 20.0), min_size=2, max_size=8),
    scales=st.lists(st.floats(1.0, 4.0), min_size=8, max_size=8),
)
def test_a_stochastically_smaller_remaining_latency_always_ranks_first(
    seed: int, shifts: list[float], scales: list[float]
) -> None:
    """Shifting up and stretching a positive base never decreases a quantile: with shifts
    and scales both ascending the agents form a dominance chain, and their scores keep its
    order whatever the base distribution."""
    base = np.random.default_rng(seed).exponential(1.0, 64)
    params = list(zip(sorted(shifts), sorted(scales[: len(shifts)]), strict=True))
    dists = {f"a{i}": s + c * base for i, (s, c) in enumerate(params)}
    scores = agent_scores(dists)
    ranked = sorted(scores, key=lambda k: scores[k])
    order = [f"a{i}" for i in range(len(params))]
    for smaller, larger in itertools.pairwise(order):
        assert scores[smaller] <= scores[larger] + 1e-9, (ranked, params)
    assert all(v >= -1e-9 for v in scores.values())


def test_no_samples_no_scores() -> None:
    assert agent_scores({"a": np.zeros(0)}) == {}


def test_agents_sharing_a_distribution_get_exactly_the_same_score() -> None:
    pooled = np.random.default_rng(1).exponential(3.0, 200)
    scores = agent_scores({"a": pooled, "b": pooled.copy(), "c": pooled + 5.0})
    assert scores["a"] == scores["b"] < scores["c"]
