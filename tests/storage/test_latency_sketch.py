"""The log-scale histogram: 1 % quantile error against exact nearest-rank, exact merges."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.latency_sketch import (
    ALPHA,
    FLOOR_MS,
    N_BUCKETS,
    DenseHistogram,
    LogHistogram,
    bucket_of,
    bucket_value,
)

latencies = st.lists(
    st.floats(min_value=0.02, max_value=3.6e6, allow_nan=False), min_size=1, max_size=300
)
quantiles = st.sampled_from([0.01, 0.25, 0.5, 0.9, 0.95, 0.99, 1.0])


def _exact(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q * len(ordered) - 1e-9)) - 1]


@settings(max_examples=300, deadline=None)
@given(latencies, quantiles)
def test_quantile_is_within_alpha_of_the_exact_nearest_rank(values: list[float], q: float) -> None:
    hist = LogHistogram()
    hist.add_all(values)
    estimate = hist.quantile(q)
    exact = _exact(values, q)
    assert estimate is not None
    assert abs(estimate - exact) <= ALPHA * exact * (1 + 1e-9)


@settings(max_examples=100, deadline=None)
@given(st.lists(latencies, min_size=1, max_size=6))
def test_merging_parts_equals_the_histogram_of_the_whole(parts: list[list[float]]) -> None:
    merged = LogHistogram()
    for part in parts:
        piece = LogHistogram()
        piece.add_all(part)
        merged.merge(LogHistogram.from_bytes(piece.to_bytes()))  # through the stored form
    whole = LogHistogram()
    whole.add_all(v for part in parts for v in part)
    assert merged == whole
    assert merged.total == sum(len(p) for p in parts)


def test_every_bucket_value_is_within_alpha_of_its_range() -> None:
    for value in np.geomspace(FLOOR_MS * 1.0001, 1e7, 20_000):
        assert abs(bucket_value(bucket_of(float(value))) - value) <= ALPHA * value * (1 + 1e-9)


def test_tiny_and_zero_values_share_the_floor_bucket_and_empty_has_no_quantile() -> None:
    hist = LogHistogram()
    assert hist.quantile(0.5) is None
    hist.add(0.0)
    hist.add(FLOOR_MS)
    assert hist.counts == {0: 2}
    assert hist.quantile(0.99) == FLOOR_MS
    assert LogHistogram.from_bytes(hist.to_bytes()) == hist


@settings(max_examples=100, deadline=None)
@given(st.lists(latencies, min_size=1, max_size=5), quantiles)
def test_dense_merge_of_stored_histograms_matches_the_sparse_one(
    parts: list[list[float]], q: float
) -> None:
    dense, sparse = DenseHistogram(), LogHistogram()
    for part in parts:
        piece = LogHistogram()
        piece.add_all(part)
        dense.merge_bytes(piece.to_bytes())
        sparse.merge(piece)
    assert dense.total == sparse.total
    assert dense.quantile(q) == sparse.quantile(q)


def test_stored_form_is_a_dense_uint32_run_and_huge_values_saturate() -> None:
    hist = LogHistogram()
    assert hist.to_bytes() == b"" and DenseHistogram().quantile(0.5) is None
    hist.add(1.0, 3)
    hist.add(1.1)
    stored = np.frombuffer(hist.to_bytes(), dtype="<u4")
    assert stored[0] == bucket_of(1.0) and stored[1] == 3 and stored[-1] == 1
    assert len(stored) == bucket_of(1.1) - bucket_of(1.0) + 2
    assert bucket_of(1e12) == bucket_of(1e9) == N_BUCKETS - 1


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.floats(min_value=0.0, max_value=1e9), max_size=50), max_size=8))
def test_merge_many_equals_merging_one_by_one(parts: list[list[float]]) -> None:
    stored = []
    for part in parts:
        piece = LogHistogram()
        piece.add_all(part)
        stored.append(piece.to_bytes())
    at_once, one_by_one = DenseHistogram(), DenseHistogram()
    at_once.merge_many(stored)
    for data in stored:
        one_by_one.merge_bytes(data)
    assert np.array_equal(at_once.counts, one_by_one.counts)
    assert at_once.total == sum(len(p) for p in parts)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(min_value=0.0, max_value=3.6e6), max_size=100), latencies)
def test_subtracting_a_merged_part_leaves_exactly_the_rest(
    rest: list[float], part: list[float]
) -> None:
    """What a replaced request row added to a rollup is taken back exactly: same counts, same
    stored form (a bucket back at zero is not stored), empty when nothing else was in it."""
    whole, taken, expected = LogHistogram(), LogHistogram(), LogHistogram()
    whole.add_all(rest + part)
    taken.add_all(part)
    expected.add_all(rest)
    whole.subtract(taken)
    assert whole.counts == expected.counts
    assert whole.to_bytes() == expected.to_bytes()


def test_subtracting_what_was_never_added_raises_and_changes_nothing() -> None:
    hist, other = LogHistogram(), LogHistogram()
    hist.add_all([5.0, 5.0, 700.0])
    other.add_all([5.0, 80.0])
    with pytest.raises(ValueError, match="more than the histogram holds"):
        hist.subtract(other)
    assert hist.counts == {bucket_of(5.0): 2, bucket_of(700.0): 1}
