"""An agent's latency samples and their convergence (Kairos §5.3).

A bounded window keeps the latest `window` samples (memory stays flat however long Arbiter
runs, and the distribution follows a drifting workload). Each time the number of samples seen
doubles — once the window is full, every `window` samples — the 1-D Wasserstein distance
(scipy) between the window now and the window at the previous check is measured; the samples
have *converged* when it is below `tolerance` × their mean. A later check that fails
un-converges them (a workload that changed).
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

FIRST_CHECK = 8
"""Samples before the first convergence check (and the first reference window)."""
KEPT_QUANTILES = 32
"""A checkpoint keeps a window as this many quantiles (its quantile function, which is what a
Wasserstein distance reads), not every sample: the leader checkpoints every second."""


def _quantiles(values: list[float]) -> list[float]:
    if len(values) <= KEPT_QUANTILES:
        return [round(v, 4) for v in values]
    qs = np.quantile(values, (np.arange(KEPT_QUANTILES) + 0.5) / KEPT_QUANTILES)
    return [round(float(q), 4) for q in qs]


class Samples:
    """Latest `window` latency samples (seconds), with a convergence flag."""

    def __init__(self, window: int = 512, tolerance: float = 0.05) -> None:
        self.window = window
        self.tolerance = tolerance
        self.values: deque[float] = deque(maxlen=window)
        self.seen = 0
        self.converged = False
        self.distance: float | None = None
        """The last convergence check's Wasserstein distance over the mean (None before)."""
        self._reference: list[float] = []
        self._next_check = FIRST_CHECK

    def add(self, value: float) -> None:
        self.values.append(value)
        self.seen += 1
        if self.seen >= self._next_check:
            self._check()

    def _check(self) -> None:
        now = list(self.values)
        if self._reference:
            mean = float(np.mean(now))
            from scipy.stats import wasserstein_distance  # see `orchestrator.kde_mode`

            w = float(wasserstein_distance(self._reference, now))
            self.distance = w / mean if mean > 0 else 0.0
            self.converged = self.distance < self.tolerance
        self._reference = now
        # doubling, until the window is full: then every window's worth, so a changed
        # workload is noticed within a window however long Arbiter has run
        self._next_check = self.seen + min(self.seen, self.window)

    def array(self) -> np.ndarray:
        return np.fromiter(self.values, dtype=np.float64, count=len(self.values))

    def to_json(self) -> dict[str, Any]:
        return {
            "values": _quantiles(list(self.values)),
            "seen": self.seen,
            "converged": self.converged,
            "distance": self.distance,
            "reference": _quantiles(self._reference),
            "next_check": self._next_check,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], window: int, tolerance: float) -> Samples:
        """The window back as its kept quantiles (new samples refill it)."""
        samples = cls(window, tolerance)
        samples.values.extend(float(v) for v in data.get("values") or [])
        samples.seen = int(data.get("seen", len(samples.values)))
        samples.converged = bool(data.get("converged", False))
        distance = data.get("distance")
        samples.distance = float(distance) if distance is not None else None
        samples._reference = [float(v) for v in data.get("reference") or []][-window:]
        samples._next_check = int(data.get("next_check", max(FIRST_CHECK, 2 * samples.seen)))
        return samples
