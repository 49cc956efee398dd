"""A mergeable log-scale latency histogram with a guaranteed relative error (DDSketch-style).

Bucket `k ≥ 1` holds the values in `(FLOOR_MS·γ^(k-1), FLOOR_MS·γ^k]` with
`γ = (1 + ALPHA) / (1 - ALPHA)`; bucket 0 holds everything at or below `FLOOR_MS` (0.01 ms) and
the last bucket everything above `CEILING_MS` (10⁸ ms ≈ 28 h). A bucket is reported as
`FLOOR_MS · 2γ^k / (γ + 1)`, which is within `ALPHA` (1 %) of every value in it.

Guarantee: for latencies in [FLOOR_MS, CEILING_MS], `quantile(q)` is within 1 % (relative) of
the exact nearest-rank quantile — the value of rank `⌈q·n⌉` in sorted order — because that
value lies in the bucket where the cumulative count first reaches `⌈q·n⌉`. Merging adds
counts, so it is exact and associative: the merge of per-minute histograms equals the
histogram of all their values.

Stored form (rollup rows, `to_bytes`): little-endian uint32 `[lo, c_lo, c_lo+1, …, c_hi]`, the
dense run from the lowest to the highest non-empty bucket (empty histogram: no bytes). Reports
merge thousands of these per second with numpy (`DenseHistogram`). `ALPHA`, `FLOOR_MS` and
`N_BUCKETS` are part of the stored format: changing them needs a data migration.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import numpy as np

ALPHA = 0.01
GAMMA = (1 + ALPHA) / (1 - ALPHA)
FLOOR_MS = 0.01
CEILING_MS = 1e8
_LOG_GAMMA = math.log(GAMMA)
N_BUCKETS = math.ceil(math.log(CEILING_MS / FLOOR_MS) / _LOG_GAMMA) + 2
_WIRE = np.dtype("<u4")


def bucket_of(value_ms: float) -> int:
    """The bucket index of a latency in milliseconds."""
    if value_ms <= FLOOR_MS:
        return 0
    k = math.ceil(math.log(value_ms / FLOOR_MS) / _LOG_GAMMA)
    return min(N_BUCKETS - 1, max(1, k))


def bucket_value(k: int) -> float:
    """The value reported for bucket `k` (within ALPHA of every value it holds)."""
    if k <= 0:
        return FLOOR_MS
    return FLOOR_MS * 2 * GAMMA**k / (GAMMA + 1)


def nearest_rank(n: int, q: float) -> int:
    """The 1-based rank of the q-quantile among n sorted values (nearest-rank definition)."""
    return min(n, max(1, math.ceil(q * n - 1e-9)))


class LogHistogram:
    """Counts of latencies per log-scale bucket; `add`, `merge`, `quantile`, JSON round trip."""

    __slots__ = ("counts",)

    def __init__(self, counts: Mapping[int, int] | None = None) -> None:
        self.counts: dict[int, int] = dict(counts or {})

    @property
    def total(self) -> int:
        """How many values were added."""
        return sum(self.counts.values())

    def add(self, value_ms: float, count: int = 1) -> None:
        """Record `count` occurrences of `value_ms`."""
        k = bucket_of(value_ms)
        self.counts[k] = self.counts.get(k, 0) + count

    def add_bucket(self, k: int, count: int = 1) -> None:
        """Record `count` values already mapped to bucket `k` (see `bucket_of`)."""
        self.counts[k] = self.counts.get(k, 0) + count

    def add_all(self, values_ms: Iterable[float]) -> None:
        """Record every value."""
        for value in values_ms:
            self.add(value)

    def merge(self, other: LogHistogram) -> None:
        """Add `other`'s counts to this histogram (exact)."""
        counts = self.counts
        for k, c in other.counts.items():
            counts[k] = counts.get(k, 0) + c

    def subtract(self, other: LogHistogram) -> None:
        """Take `other`'s counts back out of this histogram (exact); `other` must be part of
        it: a count that would go below zero raises ValueError and changes nothing."""
        counts = self.counts
        short = [k for k, c in other.counts.items() if c > counts.get(k, 0)]
        if short:
            raise ValueError(f"subtracting more than the histogram holds (buckets {short[:5]})")
        for k, c in other.counts.items():
            left = counts.get(k, 0) - c
            if left:
                counts[k] = left
            else:
                counts.pop(k, None)

    def merge_bytes(self, data: bytes) -> None:
        """Add the counts of a histogram in its stored form."""
        if not data:
            return
        run = np.frombuffer(data, dtype=_WIRE)
        lo, counts = int(run[0]), self.counts
        for offset, c in enumerate(run[1:].tolist()):
            if c:
                counts[lo + offset] = counts.get(lo + offset, 0) + c

    def quantile(self, q: float) -> float | None:
        """The q-quantile (0 < q ≤ 1) within ALPHA of the exact one; None when empty."""
        n = self.total
        if n == 0:
            return None
        rank = nearest_rank(n, q)
        seen = 0
        for k in sorted(self.counts):
            seen += self.counts[k]
            if seen >= rank:
                return bucket_value(k)
        raise AssertionError("unreachable: ranks never exceed the total")

    def to_bytes(self) -> bytes:
        """The stored form (see the module docstring)."""
        present = [k for k, c in self.counts.items() if c]
        if not present:
            return b""
        lo, hi = min(present), max(present)
        run = np.zeros(hi - lo + 2, dtype=_WIRE)
        run[0] = lo
        for k in present:
            run[k - lo + 1] = self.counts[k]
        return run.tobytes()

    @classmethod
    def from_bytes(cls, data: bytes) -> LogHistogram:
        """Inverse of `to_bytes`."""
        hist = cls()
        hist.merge_bytes(data)
        return hist

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LogHistogram):
            return NotImplemented
        return self.to_bytes() == other.to_bytes()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"LogHistogram(total={self.total}, buckets={len(self.counts)})"


class DenseHistogram:
    """A merge target for many stored histograms: one numpy count per bucket.

    Same buckets, same guarantee as `LogHistogram`; merging a stored histogram costs one
    vectorised add, whatever its number of buckets.
    """

    __slots__ = ("counts",)

    def __init__(self) -> None:
        self.counts = np.zeros(N_BUCKETS, dtype=np.int64)

    @property
    def total(self) -> int:
        """How many values were merged in."""
        return int(self.counts.sum())

    def merge_bytes(self, data: bytes) -> None:
        """Add a histogram in its stored form."""
        if data:
            run = np.frombuffer(data, dtype=_WIRE)
            lo = int(run[0])
            self.counts[lo : lo + len(run) - 1] += run[1:]

    def merge_many(self, stored: list[bytes]) -> None:
        """Add many histograms in their stored form at once (a constant number of numpy
        calls, however many there are)."""
        stored = [data for data in stored if data]
        if not stored:
            return
        lengths = np.fromiter((len(data) // 4 for data in stored), np.int64, len(stored))
        words = np.frombuffer(b"".join(stored), dtype=_WIRE)
        heads = np.cumsum(lengths) - lengths  # where each run's `lo` sits
        run_of = np.repeat(np.arange(len(stored)), lengths)
        offset = np.arange(len(words)) - heads[run_of]  # 0 at a head, k for its k-th count
        body = offset > 0
        buckets = words[heads].astype(np.int64)[run_of[body]] + offset[body] - 1
        self.counts += np.bincount(buckets, weights=words[body], minlength=N_BUCKETS).astype(
            np.int64
        )

    def merge(self, hist: LogHistogram) -> None:
        """Add a sparse histogram."""
        for k, c in hist.counts.items():
            self.counts[k] += c

    def quantile(self, q: float) -> float | None:
        """The q-quantile (0 < q ≤ 1) within ALPHA of the exact one; None when empty."""
        cumulative = np.cumsum(self.counts)
        n = int(cumulative[-1])
        if n == 0:
            return None
        return bucket_value(int(np.searchsorted(cumulative, nearest_rank(n, q))))
