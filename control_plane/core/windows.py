"""A bucketed sliding-window sum: constant memory per node whatever the event rate."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from functools import reduce
from operator import add
from typing import Any


class SlidingWindow:
    """Sum of amounts added during the last `window_s` seconds, at `bucket_s` resolution.

    Amounts are kept in buckets `[k·bucket_s, (k+1)·bucket_s)`; a bucket counts while its end
    lies after `now − window_s`, so the window is exact to within one bucket. Time must not go
    backwards by more than a bucket; an earlier amount is added to the newest bucket.
    """

    __slots__ = ("_buckets", "_sum", "bucket_s", "window_s")

    def __init__(self, window_s: float, bucket_s: float) -> None:
        if window_s <= 0 or bucket_s <= 0:
            raise ValueError("window_s and bucket_s must be > 0")
        self.window_s = window_s
        self.bucket_s = bucket_s
        self._buckets: deque[list[float]] = deque()
        self._sum = 0.0

    def add(self, now: float, amount: float) -> None:
        index = math.floor(now / self.bucket_s)
        if self._buckets and self._buckets[-1][0] >= index:
            self._buckets[-1][1] += amount
        else:
            self._buckets.append([float(index), amount])
        self._sum += amount

    def add_all(self, now: float, amounts: Sequence[float]) -> None:
        """`add(now, a)` for every `a` of `amounts`, in order: the same sums, bit for bit.

        The additions run one by one, left to right (`functools.reduce`), never as one
        pre-summed amount: float addition is not associative.
        """
        if not amounts:
            return
        index = math.floor(now / self.bucket_s)
        buckets = self._buckets
        if buckets and buckets[-1][0] >= index:
            last = buckets[-1]
            last[1] = reduce(add, amounts, last[1])
        else:
            rest = iter(amounts)
            first = next(rest)
            buckets.append([float(index), reduce(add, rest, first)])
        self._sum = reduce(add, amounts, self._sum)

    def total(self, now: float) -> float:
        """The windowed sum at time `now`."""
        oldest_end = now - self.window_s
        expired = False
        while self._buckets and (self._buckets[0][0] + 1) * self.bucket_s <= oldest_end:
            self._buckets.popleft()
            expired = True
        if expired:  # re-add rather than subtract, so float error never accumulates
            self._sum = sum(value for _, value in self._buckets)
        return self._sum

    def copy(self) -> SlidingWindow:
        """An independent window with the same buckets and the same running sum."""
        twin = SlidingWindow(self.window_s, self.bucket_s)
        twin._buckets = deque([index, value] for index, value in self._buckets)
        twin._sum = self._sum
        return twin

    def to_json(self) -> list[list[float]]:
        return [[index, value] for index, value in self._buckets]

    def load_json(self, data: list[Any]) -> None:
        self._buckets = deque([float(index), float(value)] for index, value in data)
        self._sum = sum(value for _, value in self._buckets)
