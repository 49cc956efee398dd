"""Offered load and queue waits per node over a sliding window, for the live view (pure).

The scheduler core reports each new arrival (with its estimated cost) and each dispatch (with
how long the request waited); `LiveWindows` keeps, per node at every level, the offered
Unified Tokens and a histogram of waits over the last `window_s` seconds. Memory per node is
fixed by the window (`window_s / bucket_s` buckets, each at most `WAIT_BINS` wait bins).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable

from control_plane.core.windows import SlidingWindow

Node = tuple[str, ...]
WAIT_FLOOR_S = 0.01
WAIT_RATIO = 1.1
WAIT_BINS = 150
"""Bin k holds waits in (FLOOR · RATIO^(k−1), FLOOR · RATIO^k]: ≤ 10 % error, up to ~17 h."""


def _bin(wait_s: float) -> int:
    if wait_s <= WAIT_FLOOR_S:
        return 0
    return min(WAIT_BINS - 1, math.ceil(math.log(wait_s / WAIT_FLOOR_S, WAIT_RATIO)))


def _upper(k: int) -> float:
    return WAIT_FLOOR_S * WAIT_RATIO**k


class WaitWindow:
    """Waits recorded during the last `window_s` seconds, as a log-binned histogram.

    `quantile` answers the upper edge of the bin holding the quantile: never below the true
    value, at most 10 % above it (for waits above 10 ms).
    """

    __slots__ = ("_buckets", "bucket_s", "window_s")

    def __init__(self, window_s: float, bucket_s: float) -> None:
        self.window_s = window_s
        self.bucket_s = bucket_s
        self._buckets: deque[tuple[int, dict[int, int]]] = deque()

    def add(self, now: float, wait_s: float) -> None:
        index = math.floor(now / self.bucket_s)
        if not self._buckets or self._buckets[-1][0] < index:
            self._buckets.append((index, {}))
        bins = self._buckets[-1][1]
        k = _bin(max(0.0, wait_s))
        bins[k] = bins.get(k, 0) + 1

    def _expire(self, now: float) -> None:
        oldest_end = now - self.window_s
        while self._buckets and (self._buckets[0][0] + 1) * self.bucket_s <= oldest_end:
            self._buckets.popleft()

    def count(self, now: float) -> int:
        self._expire(now)
        return sum(sum(bins.values()) for _, bins in self._buckets)

    def quantile(self, now: float, q: float) -> float | None:
        """The q-quantile of the waits in the window; None when there were none."""
        self._expire(now)
        merged: dict[int, int] = {}
        for _, bins in self._buckets:
            for k, n in bins.items():
                merged[k] = merged.get(k, 0) + n
        total = sum(merged.values())
        if total == 0:
            return None
        rank, seen = math.ceil(q * total), 0
        for k in sorted(merged):
            seen += merged[k]
            if seen >= max(1, rank):
                return _upper(k)
        return _upper(max(merged))


class LiveWindows:
    """Per node (tenant, tenant/app, tenant/app/agent): offered Unified Tokens and queue waits
    over the last `window_s` seconds.

    Demand is what the scheduler knows at arrival — the prompt plus the expected output (the
    length predictor's estimate, else the `max_tokens` cap), priced like service — never the
    true output length. Re-queues after a worker failure are not new demand.
    """

    def __init__(self, window_s: float = 60.0, bucket_s: float = 5.0) -> None:
        self.window_s = window_s
        self.bucket_s = bucket_s
        self._offered: dict[Node, SlidingWindow] = {}
        self._waits: dict[Node, WaitWindow] = {}

    def arrived(self, path: Node, now: float, cost: float) -> None:
        for depth in range(1, len(path) + 1):
            node = path[:depth]
            window = self._offered.get(node)
            if window is None:
                window = self._offered[node] = SlidingWindow(self.window_s, self.bucket_s)
            window.add(now, cost)

    def dispatched(self, path: Node, now: float, wait_s: float) -> None:
        for depth in range(1, len(path) + 1):
            node = path[:depth]
            window = self._waits.get(node)
            if window is None:
                window = self._waits[node] = WaitWindow(self.window_s, self.bucket_s)
            window.add(now, wait_s)

    def demand_rate(self, node: Node, now: float) -> float:
        """Offered Unified Tokens per second over the window."""
        window = self._offered.get(node)
        return 0.0 if window is None else window.total(now) / self.window_s

    def wait_p95(self, node: Node, now: float) -> float | None:
        """p95 queue wait (s) of the requests dispatched in the window; None when none was."""
        window = self._waits.get(node)
        return None if window is None else window.quantile(now, 0.95)

    def nodes(self) -> Iterable[Node]:
        return set(self._offered) | set(self._waits)

    def prune(self, now: float) -> None:
        """Forget nodes with nothing left in their windows (bounded memory)."""
        for node in [n for n, w in self._offered.items() if w.total(now) == 0.0]:
            del self._offered[node]
        for node in [n for n, w in self._waits.items() if w.count(now) == 0]:
            del self._waits[node]
