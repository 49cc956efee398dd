"""Agent priority from remaining-latency distributions (Kairos §5.4).

The distributions of all agents plus a point mass at 0 (the *zero-latency anchor*) give a
pairwise 1-D Wasserstein matrix (scipy); classical MDS (numpy: double-centred squared
distances, top eigenvector) embeds it on one axis, oriented so the anchor is at the low end.
An agent's score is its distance along that axis from the anchor: the lower, the sooner its
workflows are expected to finish, the higher its priority. When every pair of distributions is
ordered by stochastic dominance the Wasserstein metric is a line metric (quantile functions
never cross) and MDS recovers that line exactly, so a dominated agent always ranks first.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import TypeVar

import numpy as np
from scipy.stats import wasserstein_distance

ANCHOR = np.zeros(1)
K = TypeVar("K", bound=Hashable)


def wasserstein_matrix(dists: list[np.ndarray]) -> np.ndarray:
    n = len(dists)
    d = np.zeros((n, n))
    for i in range(n):
        for j in range(i + 1, n):
            d[i, j] = d[j, i] = wasserstein_distance(dists[i], dists[j])
    return d


def classical_mds_1d(d: np.ndarray) -> np.ndarray:
    """Coordinates on one axis whose distances best match `d` (Torgerson's classical MDS)."""
    n = d.shape[0]
    centre = np.eye(n) - np.full((n, n), 1.0 / n)
    b = -0.5 * centre @ (d**2) @ centre
    values, vectors = np.linalg.eigh(b)
    top = int(np.argmax(values))
    result: np.ndarray = vectors[:, top] * np.sqrt(max(values[top], 0.0))
    return result


def agent_scores(dists: Mapping[K, np.ndarray]) -> dict[K, float]:
    """Each key's MDS distance from the zero-latency anchor (lower = higher priority)."""
    keys = [k for k, v in dists.items() if v.size]
    if not keys:
        return {}
    d = wasserstein_matrix([ANCHOR, *(dists[k] for k in keys)])
    axis = classical_mds_1d(d)
    axis = axis - axis[0]
    if float(axis @ d[0]) < 0:  # orient: farther from the anchor is farther up the axis
        axis = -axis
    return {k: float(axis[i + 1]) for i, k in enumerate(keys)}
