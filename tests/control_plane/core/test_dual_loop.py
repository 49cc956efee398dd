"""Statera's dual loop: a P-loop on the token budget, an I-loop on concurrency, both clipped."""

from __future__ import annotations

import pytest

from control_plane.core.dual_loop import DualLoop


def test_over_the_band_both_caps_tighten_and_stop_at_their_bounds() -> None:
    loop = DualLoop(budget_min=0.3, n_min=2, n_max=64)
    assert loop.budget == 1.0 and loop.n_run == 64.0
    now = 0.0
    for _ in range(200):
        assert loop.due(now)
        loop.update(1.0, now)
        now += loop.period_s
    assert loop.budget == pytest.approx(0.3) and loop.n_run == 2.0


def test_inside_the_band_nothing_moves_and_under_it_caps_loosen() -> None:
    loop = DualLoop(n_max=64)
    loop.update(1.0, 0.0)
    tight = (loop.budget, loop.n_run)
    assert tight < (1.0, 64.0)
    loop = DualLoop(n_max=64, window=1)
    loop.update(1.0, 0.0)
    budget, n_run = loop.budget, loop.n_run
    loop.update(0.8, 0.5)  # in the band: no error
    assert (loop.budget, loop.n_run) == (budget, n_run)
    loop.update(0.1, 1.0)
    assert loop.budget > budget and loop.n_run > n_run
    assert not loop.due(1.2)


def test_snapshot_restores_the_same_state_and_bounds_are_checked() -> None:
    loop = DualLoop()
    for k in range(5):
        loop.update(0.95 + 0.01 * k, 0.5 * k)
    again = DualLoop()
    again.restore(loop.snapshot())
    assert again.snapshot() == loop.snapshot()
    with pytest.raises(ValueError):
        DualLoop(u_low=0.9, u_high=0.7)
