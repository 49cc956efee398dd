"""The online latency fit: defaults until fitted, least squares per model, always positive."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from control_plane.core.job import Job, Outcome
from control_plane.core.latency import LinearLatency
from control_plane.core.latency_fit import FittedLatency
from tests.control_plane.policies.jobs import job

DEFAULT = LinearLatency()


def served(model: FittedLatency, n_in: int, prefill: float, tpot: float, queue: float = 0.0,
           name: str = "default") -> None:  # fmt: skip
    j = job("x", n_in=n_in, model=name)
    model.observe(j, Outcome("ok", n_in, 50, ttft_s=queue + prefill, tpot_s=tpot, queue_s=queue))


def test_defaults_until_enough_answers_then_the_least_squares_line() -> None:
    m = FittedLatency(min_samples=16, refit_every=16)
    probe = job("p", n_in=1000)
    for k in range(15):
        served(m, 100 + 50 * k, 0.2 + 0.001 * (100 + 50 * k), 0.03, queue=5.0)
    assert (m.ttft(probe), m.tpot(probe)) == (DEFAULT.ttft(probe), DEFAULT.tpot(probe))
    served(m, 2000, 0.2 + 0.001 * 2000, 0.03, queue=9.0)
    assert m.ttft(probe) == pytest.approx(0.2 + 0.001 * 1000)  # queueing is not prefill
    assert m.tpot(probe) == pytest.approx(0.03)
    assert m.fits()["default"]["samples"] == 16
    other = job("q", n_in=1000, model="other")
    assert m.ttft(other) == DEFAULT.ttft(other)  # per model


def test_failed_requests_teach_nothing() -> None:
    m = FittedLatency(min_samples=1, refit_every=1)
    j = job("x", n_in=10)
    m.observe(j, Outcome("error", 10, 0, ttft_s=99.0, tpot_s=9.0))
    assert m.fits() == {}


@given(
    st.lists(
        st.tuples(st.integers(1, 8000), st.floats(0, 30), st.floats(1e-4, 2)),
        min_size=16,
        max_size=64,
    )
)
def test_estimates_are_always_positive_and_finite(
    samples: list[tuple[int, float, float]],
) -> None:
    m = FittedLatency(min_samples=16, refit_every=16)
    for n_in, prefill, tpot in samples:
        served(m, n_in, prefill, tpot)
    for n_in in (1, 500, 8000, 100_000):
        probe = job("p", n_in=n_in)
        assert 0 < m.ttft(probe) < float("inf") and 0 < m.tpot(probe) < float("inf")


def test_snapshot_restores_the_same_fit_through_json() -> None:
    rng = random.Random(2)
    m = FittedLatency(min_samples=8, refit_every=8)
    for _ in range(40):
        n = rng.randint(50, 4000)
        served(m, n, 0.05 + 3e-4 * n + rng.uniform(0, 0.02), rng.uniform(0.02, 0.05))
    again = FittedLatency(min_samples=8, refit_every=8)
    again.restore(json.loads(json.dumps(m.snapshot())))
    probe = job("p", n_in=1234)
    assert again.ttft(probe) == pytest.approx(m.ttft(probe), rel=0.05)
    assert again.tpot(probe) == pytest.approx(m.tpot(probe), rel=0.05)
    bad = {"default": {"prefill": [["x"], ["x", 1]], "tpot": ["?"]}, "n": 3}
    again.restore(bad)  # malformed entries are skipped, nothing raises


class _Eager(FittedLatency):
    """The reference: every refit computed as soon as it is due."""

    def observe(self, job: Job, outcome: Outcome) -> None:
        super().observe(job, outcome)
        self._settle()


def test_a_refit_computed_when_read_is_the_one_due_then() -> None:
    """Reads between refits, reads long after several, models fitted in either order and a
    restore in between: the same coefficients, and the same `fits()`, as fitting at once."""
    rng = random.Random(3)
    lazy, eager = FittedLatency(window=40), _Eager(window=40)
    for i in range(900):
        name = "a" if rng.random() < 0.6 else "b"
        n_in = rng.randrange(10, 4000)
        prefill, tpot = 0.1 + 2e-4 * n_in * rng.uniform(0.9, 1.1), rng.uniform(0.01, 0.03)
        for m in (lazy, eager):
            served(m, n_in, prefill, tpot, name=name)
        if rng.random() < 0.05:
            probe = job("p", n_in=rng.randrange(10, 4000), model=rng.choice("ab"))
            assert (lazy.ttft(probe), lazy.tpot(probe)) == (eager.ttft(probe), eager.tpot(probe))
        if i == 500:
            snapshot = eager.snapshot()
            for m in (lazy, eager):
                m.restore({"c": snapshot["a"]})
    assert lazy.fits() == eager.fits()
    assert list(lazy.fits()) == list(eager.fits())


def test_a_restore_keeps_the_order_in_which_models_were_first_fitted() -> None:
    lazy, eager = FittedLatency(), _Eager()
    for m in (lazy, eager):
        for k in range(16):  # "x" is due its first fit, unread
            served(m, 100 + k, 0.1 + 1e-4 * k, 0.02, name="x")
        m.restore({"y": {"prefill": [[100 + k, 0.1] for k in range(16)], "tpot": [0.02] * 16}})
    assert list(lazy.fits()) == list(eager.fits()) == ["x", "y"]
