"""Predicted KV-cache use of one worker per future time slot (Kairos §5.5).

A request started at `start` is predicted to hold `m(t) = n_in + v · (t − start)` tokens for
`t ∈ [start, start + ê]` (`v` its decode growth, `ê` its predicted duration), capped at
prompt + output cap. Time is cut into slots of `slot_s`; a slot holds the usage at its end
(the most within it). Arrays of absolute slot indices: adding or releasing a request, and the
peak of the slots a new request would cover, are numpy operations over its own slots only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class Curve:
    """A request's predicted usage: tokens in slots `first`, `first + 1`, …"""

    first: int
    tokens: np.ndarray


def curve(n_in: int, cap: int, v: float, start: float, e_hat: float, slot_s: float) -> Curve:
    first = math.floor(start / slot_s)
    last = math.floor((start + max(e_hat, 0.0)) / slot_s)
    ends = (np.arange(first, last + 1) + 1) * slot_s
    elapsed = np.clip(ends - start, 0.0, e_hat)
    return Curve(first, np.minimum(n_in + v * elapsed, n_in + cap))


class SlotLedger:
    """One worker's predicted tokens per slot; slots before `now` are dropped as time goes."""

    def __init__(self, slot_s: float) -> None:
        self.slot_s = slot_s
        self.base = 0
        self.usage = np.zeros(0)

    def _window(self, first: int, n: int) -> slice:
        if first < self.base:  # behind the kept slots: they are past
            raise ValueError("slot before the ledger's base")
        need = first - self.base + n
        if need > self.usage.size:
            self.usage = np.concatenate([self.usage, np.zeros(need - self.usage.size)])
        return slice(first - self.base, need)

    def advance(self, now: float) -> None:
        current = math.floor(now / self.slot_s)
        drop = min(current - self.base, self.usage.size)
        if drop > 0:
            self.usage = self.usage[drop:]
            self.base += drop
        self.base = max(self.base, current)

    def _clipped(self, c: Curve) -> Curve:
        skip = max(0, self.base - c.first)
        return Curve(c.first + skip, c.tokens[skip:])

    def add(self, c: Curve, sign: float = 1.0) -> None:
        c = self._clipped(c)
        if c.tokens.size:
            window = self._window(c.first, c.tokens.size)  # may grow `usage`: index it after
            self.usage[window] += sign * c.tokens
            np.maximum(self.usage, 0.0, out=self.usage)  # float rounding never goes below 0

    def peak_with(self, c: Curve) -> float:
        """The highest slot over `c`'s slots once `c` is added."""
        c = self._clipped(c)
        if not c.tokens.size:
            return 0.0
        window = self._window(c.first, c.tokens.size)
        return float(np.max(self.usage[window] + c.tokens))

    def peak(self) -> float:
        return float(self.usage.max()) if self.usage.size else 0.0
