"""The latency model fitted online from completed requests (H-MAS's cost prediction, §17).

`t̂_ttft = a + b · n_in` by least squares over the last `window` served requests of the job's
model (time from dispatch to the first token, so queueing at the scheduler is not counted);
`t̂_tpot` = the mean time per output token of the same requests (the running batch it depends
on is not reported per request, so the window's mean stands for it). Until a model has
`min_samples` answers the profile defaults of `LinearLatency` are used. A degenerate fit is
made safe: prompts all of one length or a negative slope give `b = 0`, `a` = the mean; the
intercept is at least 1 ms.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from control_plane.core.job import Job, Outcome
from control_plane.core.latency import LinearLatency

MIN_TTFT_S = 1e-3
_Window = tuple[tuple[tuple[int, float], ...], tuple[float, ...]]
"""One model's samples at a refit: `(n_in, prefill seconds)` pairs and TPOTs."""


@dataclass(slots=True)
class _Samples:
    size: int
    prefill: deque[tuple[int, float]] = field(default_factory=deque)
    """(n_in, seconds from dispatch to the first token)."""
    tpot: deque[float] = field(default_factory=deque)
    fresh: int = 0
    """Samples added since the last fit."""

    def add(self, n_in: int, prefill_s: float | None, tpot_s: float | None) -> None:
        if prefill_s is not None and prefill_s >= 0.0:
            self.prefill.append((n_in, prefill_s))
            if len(self.prefill) > self.size:
                self.prefill.popleft()
        if tpot_s is not None and tpot_s > 0.0:
            self.tpot.append(tpot_s)
            if len(self.tpot) > self.size:
                self.tpot.popleft()
        self.fresh += 1


@dataclass(frozen=True, slots=True)
class Fit:
    """One model's coefficients: `ttft = a + b · n_in`, `tpot`; `None` = the default's."""

    a: float | None = None
    b: float | None = None
    tpot: float | None = None
    samples: int = 0


class FittedLatency:
    """`LatencyModel` whose coefficients are fitted per model from served requests.

    Rule: see the module docstring; a model is refitted after every `refit_every` new answers
    (so a prediction costs a dictionary lookup). The fit is computed when first read: the
    window as it stood at the refit is kept until then, so a read sees the very coefficients
    an eager refit would have given, and a fit nobody reads before the next one is never
    computed. Guarantees: every estimate is finite and positive; with fewer than
    `min_samples` answers of a model it equals `default`'s; memory is `window` samples per
    model (twice that while a refit waits to be read).
    """

    def __init__(
        self,
        default: LinearLatency | None = None,
        window: int = 512,
        min_samples: int = 16,
        refit_every: int = 16,
    ) -> None:
        self.default = default or LinearLatency()
        self.window = window
        self.min_samples = min_samples
        self.refit_every = refit_every
        self._samples: dict[str, _Samples] = {}
        self._fits: dict[str, Fit] = {}
        self._due: dict[str, _Window] = {}
        """Refits not computed yet: each model's window at its latest refit, oldest first."""

    def ttft(self, job: Job) -> float:
        if self._due:
            self._settle()
        fit = self._fits.get(job.model)
        if fit is None or fit.a is None or fit.b is None:
            return self.default.ttft(job)
        return fit.a + fit.b * job.n_in

    def tpot(self, job: Job) -> float:
        if self._due:
            self._settle()
        fit = self._fits.get(job.model)
        if fit is None or fit.tpot is None:
            return self.default.tpot(job)
        return fit.tpot

    def observe(self, job: Job, outcome: Outcome) -> None:
        """Learn from a served request (others say nothing about the engine's speed)."""
        if outcome.status != "ok":
            return
        samples = self._samples.get(job.model)
        if samples is None:
            samples = self._samples[job.model] = _Samples(self.window)
        prefill = None
        if outcome.ttft_s is not None:
            prefill = outcome.ttft_s - (outcome.queue_s or 0.0)
        samples.add(job.n_in, prefill, outcome.tpot_s if outcome.n_out > 1 else None)
        if samples.fresh >= self.refit_every:
            samples.fresh = 0
            self._due[job.model] = (tuple(samples.prefill), tuple(samples.tpot))

    def _settle(self) -> None:
        """Compute the refits waiting to be read, in the order they were due."""
        for model, (prefill, tpot) in self._due.items():
            self._fits[model] = self._fit(prefill, tpot)
        self._due.clear()

    def fits(self) -> dict[str, dict[str, Any]]:
        """The coefficients in use per model (for the admin API and the results)."""
        self._settle()
        return {
            m: {"a": f.a, "b": f.b, "tpot": f.tpot, "samples": f.samples}
            for m, f in self._fits.items()
        }

    def snapshot(self) -> dict[str, Any]:
        return {
            m: {"prefill": [list(p) for p in s.prefill], "tpot": list(s.tpot)}
            for m, s in self._samples.items()
        }

    def restore(self, data: Any) -> None:
        """Reload `snapshot()` and refit; malformed entries are skipped."""
        if not isinstance(data, dict):
            return
        self._settle()  # the fits keep the order in which models were first fitted
        for model, entry in data.items():
            if not isinstance(entry, dict):
                continue
            samples = _Samples(self.window)
            for pair in entry.get("prefill") or []:
                if _numbers(pair):
                    samples.add(int(pair[0]), float(pair[1]), None)
            for t in entry.get("tpot") or []:
                if _finite(t):
                    samples.add(0, None, float(t))
            samples.fresh = 0
            self._samples[str(model)] = samples
            self._fits[str(model)] = self._fit(samples.prefill, samples.tpot)

    def _fit(self, prefill: Sequence[tuple[int, float]], tpots: Sequence[float]) -> Fit:
        a = b = tpot = None
        if len(prefill) >= self.min_samples:
            xs = np.fromiter((n for n, _ in prefill), dtype=float)
            ys = np.fromiter((t for _, t in prefill), dtype=float)
            slope, intercept = 0.0, float(ys.mean())
            if np.ptp(xs) > 0:
                slope, intercept = (float(v) for v in np.polyfit(xs, ys, 1))
                if slope < 0:
                    slope, intercept = 0.0, float(ys.mean())
            a, b = max(intercept, MIN_TTFT_S), slope
        if len(tpots) >= self.min_samples:
            tpot = float(np.mean(tpots))
        return Fit(a, b, tpot, max(len(prefill), len(tpots)))


def _numbers(pair: Any) -> bool:
    return isinstance(pair, list) and len(pair) == 2 and all(_finite(v) for v in pair)


def _finite(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
