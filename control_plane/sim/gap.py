"""The largest service gap between backlogged clients (the quantity VTC's Theorem 4.4 bounds).

For clients `a`, `b` continuously backlogged over `[t1, t2]`, the gap is
`|(S_a(t2) − S_a(t1)) − (S_b(t2) − S_b(t1))|` with `S` the weighted service (Unified Tokens
divided by the weight). With `D = S_a − S_b`, the largest gap over one joint backlog run is the
range of `D` over that run. The tracker samples `D` whenever it is told (after service changes)
and whenever a client joins or leaves the backlog, so a run never spans a gap in backlog.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

Matrix = npt.NDArray[np.float64]


class GapTracker:
    """Tracks `max range(S_a − S_b)` over joint backlog runs of every pair of clients.

    Guarantee: `worst` never decreases and equals the largest range observed at the sample
    points; with samples after every service change it is the exact largest gap.
    """

    def __init__(self, clients: Sequence[str]) -> None:
        n = len(clients)
        self.clients = list(clients)
        self.index = {c: i for i, c in enumerate(self.clients)}
        self._active = np.zeros(n, dtype=bool)
        self._low: Matrix = np.zeros((n, n))
        self._high: Matrix = np.zeros((n, n))
        self.worst = 0.0
        self.worst_pair: tuple[str, str] | None = None

    def _update(self, rows: npt.NDArray[np.intp], service: Matrix) -> None:
        """Fold the current `D` into the runs of pairs (row, active column)."""
        cols = np.flatnonzero(self._active)
        if rows.size == 0 or cols.size == 0:
            return
        d = service[rows][:, None] - service[cols][None, :]
        grid = np.ix_(rows, cols)
        low = np.minimum(self._low[grid], d)
        high = np.maximum(self._high[grid], d)
        self._low[grid], self._high[grid] = low, high
        spread = high - low
        flat = int(np.argmax(spread))
        if spread.flat[flat] > self.worst:
            self.worst = float(spread.flat[flat])
            r, c = divmod(flat, cols.size)
            self.worst_pair = (self.clients[int(rows[r])], self.clients[int(cols[c])])

    def sample(self, service: Matrix) -> None:
        """Observe weighted service (indexed like `clients`) for every backlogged pair."""
        self._update(np.flatnonzero(self._active), service)

    def join(self, client: str, service: Matrix) -> None:
        """`client` became backlogged: its runs with every backlogged client start now."""
        i = self.index[client]
        if self._active[i]:
            return
        cols = np.flatnonzero(self._active)
        d = service[i] - service[cols]
        self._low[i, cols] = self._high[i, cols] = d
        self._low[cols, i] = self._high[cols, i] = -d
        self._active[i] = True

    def leave(self, client: str, service: Matrix) -> None:
        """`client` is no longer backlogged: close its runs (after a last sample)."""
        i = self.index[client]
        if not self._active[i]:
            return
        self._update(np.array([i], dtype=np.intp), service)
        self._active[i] = False

    def backlogged(self) -> list[str]:
        return [c for c, on in zip(self.clients, self._active, strict=True) if on]
