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
    points; with samples after every service change it is the exact largest gap. Only the
    runs of backlogged pairs are kept, as matrices over the backlogged clients in client
    order (a run starts afresh whenever a client joins), so a sample is a handful of numpy
    operations over them, with no index gathering.
    """

    def __init__(self, clients: Sequence[str]) -> None:
        n = len(clients)
        self.clients = list(clients)
        self.index = {c: i for i, c in enumerate(self.clients)}
        self._active = np.zeros(n, dtype=bool)
        self._cols: npt.NDArray[np.intp] = np.zeros(0, dtype=np.intp)
        """The backlogged clients, ascending: the rows and columns of `_low` and `_high`."""
        self._low: Matrix = np.zeros((0, 0))
        self._high: Matrix = np.zeros((0, 0))
        self.worst = 0.0
        self.worst_pair: tuple[str, str] | None = None

    def _record(self, spread: Matrix, rows: npt.NDArray[np.intp]) -> None:
        """Raise `worst` to the largest of `spread` (rows `rows`, columns `_cols`), the first
        in row-major order on ties."""
        flat = int(np.argmax(spread))
        if spread.flat[flat] > self.worst:
            self.worst = float(spread.flat[flat])
            r, c = divmod(flat, self._cols.size)
            self.worst_pair = (self.clients[int(rows[r])], self.clients[int(self._cols[c])])

    def sample(self, service: Matrix) -> None:
        """Observe weighted service (indexed like `clients`) for every backlogged pair."""
        cols = self._cols
        if cols.size == 0:
            return
        s = service[cols]
        d = s[:, None] - s[None, :]
        low, high = self._low, self._high
        np.minimum(low, d, out=low)
        np.maximum(high, d, out=high)
        self._record(high - low, cols)

    def join(self, client: str, service: Matrix) -> None:
        """`client` became backlogged: its runs with every backlogged client start now."""
        i = self.index[client]
        if self._active[i]:
            return
        cols = self._cols
        p = int(np.searchsorted(cols, i))
        d = service[i] - service[cols]
        self._low = _with_client(self._low, p, d)
        self._high = _with_client(self._high, p, d)
        self._cols = np.insert(cols, p, i)
        self._active[i] = True

    def leave(self, client: str, service: Matrix) -> None:
        """`client` is no longer backlogged: close its runs (after a last sample)."""
        i = self.index[client]
        if not self._active[i]:
            return
        cols = self._cols
        p = int(np.searchsorted(cols, i))
        d = (service[i] - service[cols])[None, :]
        low = np.minimum(self._low[p : p + 1], d)
        high = np.maximum(self._high[p : p + 1], d)
        self._record(high - low, cols[p : p + 1])
        self._low = _without_client(self._low, p)
        self._high = _without_client(self._high, p)
        self._cols = np.delete(cols, p)
        self._active[i] = False

    def backlogged(self) -> list[str]:
        return [c for c, on in zip(self.clients, self._active, strict=True) if on]


def _with_client(m: Matrix, p: int, d: Matrix) -> Matrix:
    """`m` with a row `d` and a column `−d` inserted at `p` (0 where they cross)."""
    k = m.shape[0]
    out = np.empty((k + 1, k + 1))
    out[:p, :p], out[:p, p + 1 :] = m[:p, :p], m[:p, p:]
    out[p + 1 :, :p], out[p + 1 :, p + 1 :] = m[p:, :p], m[p:, p:]
    out[p, :p], out[p, p + 1 :] = d[:p], d[p:]
    out[:p, p], out[p + 1 :, p] = -d[:p], -d[p:]
    out[p, p] = 0.0
    return out


def _without_client(m: Matrix, p: int) -> Matrix:
    """`m` without row and column `p`."""
    k = m.shape[0]
    out = np.empty((k - 1, k - 1))
    out[:p, :p], out[:p, p:] = m[:p, :p], m[:p, p + 1 :]
    out[p:, :p], out[p:, p:] = m[p + 1 :, :p], m[p + 1 :, p + 1 :]
    return out
