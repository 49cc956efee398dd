"""The service-gap tracker: its runs over the backlogged clients only give, sample for sample,
the worst gap and pair of tracking every pair of clients in full matrices."""

from __future__ import annotations

import random

import numpy as np
import numpy.typing as npt
import pytest

from control_plane.sim.gap import GapTracker, Matrix


class _FullMatrices:
    """The reference: every pair's run in n × n matrices, updated over the backlogged ones."""

    def __init__(self, n: int) -> None:
        self.active = np.zeros(n, dtype=bool)
        self.low, self.high = np.zeros((n, n)), np.zeros((n, n))
        self.worst, self.pair = 0.0, None  # type: float, tuple[int, int] | None

    def update(self, rows: npt.NDArray[np.intp], service: Matrix) -> None:
        cols = np.flatnonzero(self.active)
        if rows.size == 0 or cols.size == 0:
            return
        d = service[rows][:, None] - service[cols][None, :]
        grid = np.ix_(rows, cols)
        low, high = np.minimum(self.low[grid], d), np.maximum(self.high[grid], d)
        self.low[grid], self.high[grid] = low, high
        spread = high - low
        flat = int(np.argmax(spread))
        if spread.flat[flat] > self.worst:
            self.worst = float(spread.flat[flat])
            r, c = divmod(flat, cols.size)
            self.pair = (int(rows[r]), int(cols[c]))

    def join(self, i: int, service: Matrix) -> None:
        if not self.active[i]:
            cols = np.flatnonzero(self.active)
            d = service[i] - service[cols]
            self.low[i, cols] = self.high[i, cols] = d
            self.low[cols, i] = self.high[cols, i] = -d
            self.active[i] = True

    def leave(self, i: int, service: Matrix) -> None:
        if self.active[i]:
            self.update(np.array([i], dtype=np.intp), service)
            self.active[i] = False


@pytest.mark.parametrize("seed", range(5))
def test_the_worst_gap_and_pair_are_those_of_full_matrices(seed: int) -> None:
    rng = random.Random(seed)
    names = [f"c{i}" for i in range(12)]
    tracker, reference = GapTracker(names), _FullMatrices(len(names))
    service = np.zeros(len(names))
    for _ in range(3000):
        service = service + np.array([rng.choice((0.0, 0.0, 1.0, 2.5)) for _ in names])
        op, i = rng.random(), rng.randrange(len(names))
        if op < 0.2:
            tracker.join(names[i], service)
            reference.join(i, service)
        elif op < 0.4:
            tracker.leave(names[i], service)
            reference.leave(i, service)
        else:
            tracker.sample(service)
            reference.update(np.flatnonzero(reference.active), service)
        expected = None if reference.pair is None else tuple(names[j] for j in reference.pair)
        assert (tracker.worst, tracker.worst_pair) == (reference.worst, expected)
        assert tracker.backlogged() == [names[j] for j in np.flatnonzero(reference.active)]
    assert tracker.worst > 0
