"""The dual control loop of Statera (docs/algorithms.md §12.2) on a token budget and a
concurrency cap, shared by Statera admission and the meta-controller's execution loop."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any


@dataclass
class DualLoop:
    """Keeps window utilisation ū inside `[u_low, u_high]`.

    Every `period_s` one sample u is taken; ū = mean of the last `window` samples and
    `e = ū − clip(ū, u_low, u_high)`. Inner P-loop: `budget ← clip(budget − η_B·e)` (a fraction
    of KV capacity); outer I-loop: `n_run ← clip(n_run − η_N·mean(last window errors))` (a
    per-worker concurrency cap). Guarantee: both stay within their clip bounds and start at the
    loosest value, so an idle pool is never capped below what it had.
    """

    u_low: float = 0.7
    u_high: float = 0.9
    period_s: float = 0.5
    window: int = 10
    budget_min: float = 0.3
    budget_max: float = 1.0
    eta_b: float = 0.5
    n_min: int = 1
    n_max: int = 256
    eta_n: float = 32.0
    budget: float = field(init=False)
    n_run: float = field(init=False)
    last_update: float | None = field(default=None, init=False)
    _samples: deque[float] = field(init=False, repr=False)
    _errors: deque[float] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.u_low > self.u_high or self.budget_min > self.budget_max or self.n_min > self.n_max:
            raise ValueError("dual loop: each lower bound must not exceed its upper bound")
        self.budget = self.budget_max
        self.n_run = float(self.n_max)
        self._samples = deque(maxlen=self.window)
        self._errors = deque(maxlen=self.window)

    def due(self, now: float) -> bool:
        return self.last_update is None or now - self.last_update >= self.period_s

    def update(self, u: float, now: float) -> None:
        """One sample of utilisation at `now` (call when `due`)."""
        self.last_update = now
        self._samples.append(u)
        u_bar = sum(self._samples) / len(self._samples)
        error = u_bar - min(max(u_bar, self.u_low), self.u_high)
        self._errors.append(error)
        self.budget = min(max(self.budget - self.eta_b * error, self.budget_min), self.budget_max)
        mean_error = sum(self._errors) / len(self._errors)
        self.n_run = min(max(self.n_run - self.eta_n * mean_error, self.n_min), self.n_max)

    def snapshot(self) -> dict[str, Any]:
        return {
            "budget": self.budget,
            "n_run": self.n_run,
            "samples": list(self._samples),
            "errors": list(self._errors),
            "last_update": self.last_update,
        }

    def restore(self, snapshot: dict[str, Any]) -> None:
        self.budget = float(snapshot["budget"])
        self.n_run = float(snapshot["n_run"])
        self._samples.clear()
        self._samples.extend(snapshot["samples"])
        self._errors.clear()
        self._errors.extend(snapshot["errors"])
        self.last_update = snapshot["last_update"]
