"""Agent priority from remaining-latency distributions (Kairos §5.4).

The distributions of all agents plus a point mass at 0 (the *zero-latency anchor*) give a
pairwise 1-D Wasserstein matrix (on their quantile functions); classical MDS (numpy:
double-centred squared distances, top eigenvector) embeds it on one axis, oriented so the
anchor is at the low end. An agent's score is its distance along that axis from the anchor:
the lower, the sooner its workflows are expected to finish, the higher its priority. When
every pair of distributions is ordered by stochastic dominance the Wasserstein metric is a
line metric (quantile functions never cross) and MDS recovers that line exactly, so a
dominated agent always ranks first.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import TypeVar

import numpy as np

ANCHOR = np.zeros(1)
K = TypeVar("K", bound=Hashable)


GRID = (np.arange(64) + 0.5) / 64
"""Quantile levels at which distributions are compared."""


def wasserstein_matrix(dists: list[np.ndarray]) -> np.ndarray:
    """Pairwise 1-D Wasserstein distances, as the mean absolute difference of the quantile
    functions on `GRID` (W1 = ∫|F⁻¹ − G⁻¹|): one vectorised pass instead of a scipy call
    per pair, so a few hundred agents cost milliseconds."""
    q = np.stack([np.quantile(d, GRID) for d in dists])
    result: np.ndarray = np.abs(q[:, None, :] - q[None, :, :]).mean(axis=2)
    return result


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
    """Each key's MDS distance from the zero-latency anchor (lower = higher priority).
    Keys with the same samples (unconverged agents sharing their application's pooled
    window) get exactly the same score, so their order falls to the workflow start."""
    keys = [k for k, v in dists.items() if v.size]
    if not keys:
        return {}
    distinct: dict[bytes, int] = {}
    rows: list[np.ndarray] = [ANCHOR]
    index = {}
    for k in keys:
        sig = np.sort(dists[k]).tobytes()
        if sig not in distinct:
            distinct[sig] = len(rows)
            rows.append(dists[k])
        index[k] = distinct[sig]
    d = wasserstein_matrix(rows)
    axis = classical_mds_1d(d)
    axis = axis - axis[0]
    if float(axis @ d[0]) < 0:  # orient: farther from the anchor is farther up the axis
        axis = -axis
    return {k: float(axis[i]) for k, i in index.items()}
