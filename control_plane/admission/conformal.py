"""Conformal upper bound on output length, per prompt-length bucket (docs/algorithms.md §12.3)."""

from __future__ import annotations

import math
from collections import deque
from typing import Any

from control_plane.core.job import Job


class ConformalLengthBound:
    """`l_upper = l_pred + q_{1−α_b}(D_b)` over the last `window` errors `l_real − l_pred`.

    Buckets are powers of two of the prompt length starting at `bucket_base` tokens. The
    quantile is the split-conformal one, the `⌈(n+1)(1−α_b)⌉`-th smallest error, so that a new
    request's error stays under it with probability ≥ 1 − α_b when errors are exchangeable.
    With `gamma` = 0 α_b is ε. Errors are not exchangeable here (the prediction learns, the
    mix drifts), so by default α_b adapts online (adaptive conformal inference, Gibbs & Candès
    2021): after each scored answer `α_b ← α_b + γ·(ε − miss)`, which keeps the long-run miss
    rate of each bucket at ε under any drift. With too few samples for the rank, or α_b ≤ 0,
    the bound is the request's `max_tokens`.
    """

    def __init__(
        self,
        epsilon: float = 0.05,
        window: int = 500,
        bucket_base: int = 64,
        gamma: float = 0.005,
    ) -> None:
        if not 0 < epsilon < 1:
            raise ValueError("epsilon must be in (0, 1)")
        if gamma < 0:
            raise ValueError("gamma must be ≥ 0")
        self.epsilon = epsilon
        self.window = window
        self.bucket_base = bucket_base
        self.gamma = gamma
        self._errors: dict[int, deque[int]] = {}
        self._alpha: dict[int, float] = {}
        self._quantile: dict[int, float | None] = {}
        self.scored = 0
        """Answers that met a calibrated bound (one computed from earlier errors only)..."""
        self.covered = 0
        """...and those of them that stayed within it: `covered / scored` ≈ 1 − ε."""

    def bucket(self, n_in: int) -> int:
        return max(0, (max(n_in, 1) // self.bucket_base).bit_length())

    def observe(self, n_in: int, predicted: int, real: int) -> None:
        q = self.quantile(n_in)
        b = self.bucket(n_in)
        if q is not None or self._calibrated(b):
            # the bound this answer would have had: coverage, measured online; a level so low
            # that the rank passes the window means the bound `max_tokens`, which covers
            # every answer (and lets α rise again: without it a burst of misses freezes it)
            hit = q is None or real - predicted <= q
            self.scored += 1
            self.covered += hit
            if self.gamma:
                alpha = self._alpha.get(b, self.epsilon)
                alpha += self.gamma * (self.epsilon - (0.0 if hit else 1.0))
                self._alpha[b] = min(max(alpha, -1.0), 1.0)
        errors = self._errors.get(b)
        if errors is None:
            errors = self._errors[b] = deque(maxlen=self.window)
        errors.append(real - predicted)
        self._quantile.pop(b, None)

    def quantile(self, n_in: int) -> float | None:
        """`q_{1−ε}(D_b)` of the job's bucket; None while there are too few samples."""
        b = self.bucket(n_in)
        if b not in self._quantile:
            errors = sorted(self._errors.get(b, ()))
            alpha = self._alpha.get(b, self.epsilon)
            rank = math.ceil((len(errors) + 1) * (1 - alpha)) if alpha > 0 else len(errors) + 1
            self._quantile[b] = float(errors[max(rank, 1) - 1]) if rank <= len(errors) else None
        return self._quantile[b]

    def _calibrated(self, b: int) -> bool:
        """Enough errors in bucket `b` for a rank at the nominal level ε."""
        n = len(self._errors.get(b, ()))
        return math.ceil((n + 1) * (1 - self.epsilon)) <= n

    def alphas(self) -> dict[str, float]:
        """The adapted miss level of each bucket that has moved from ε."""
        return {str(b): a for b, a in sorted(self._alpha.items())}

    def load_alphas(self, data: Any) -> None:
        if isinstance(data, dict):
            self._alpha = {int(b): float(a) for b, a in data.items() if isinstance(a, int | float)}
            self._quantile.clear()

    def upper(self, job: Job) -> int:
        """Calibrated output-length bound, within `[1, max_tokens]`."""
        q = self.quantile(job.n_in)
        if q is None:
            return max(1, job.max_tokens)
        return max(1, min(job.max_tokens, math.ceil(job.expected_out + q)))

    def coverage(self) -> dict[str, Any]:
        """How often answers stayed within their calibrated bound (target `1 − epsilon`)."""
        rate = self.covered / self.scored if self.scored else None
        return {"scored": self.scored, "covered": self.covered, "rate": rate,
                "target": 1.0 - self.epsilon}  # fmt: skip

    def load_coverage(self, data: Any) -> None:
        """Reload `coverage()`'s counts (anything malformed leaves them at zero)."""
        if isinstance(data, dict):
            scored, covered = data.get("scored"), data.get("covered")
            if isinstance(scored, int) and isinstance(covered, int):
                self.scored, self.covered = scored, covered

    def to_json(self) -> dict[str, Any]:
        return {str(b): list(errors) for b, errors in sorted(self._errors.items())}

    def load_json(self, data: dict[str, Any]) -> None:
        self._errors = {int(b): deque(map(int, e), maxlen=self.window) for b, e in data.items()}
        self._quantile.clear()
