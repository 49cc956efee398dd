"""Node weights: the default, a set, and following the operator's knob."""

from __future__ import annotations

import pytest

from control_plane.core.policy import Weights


def test_a_node_the_knob_drops_is_back_to_1_and_envelope_weights_stay() -> None:
    weights = Weights()
    weights.follow_knob({("acme",): 4.0, ("beta",): 2.0})
    weights.set(("gamma", "chat"), 0.5)  # from a request's envelope, never in the knob
    before = weights.version
    weights.follow_knob({("beta",): 3.0})
    assert weights.of(("acme",)) == 1.0
    assert weights.of(("beta",)) == 3.0
    assert weights.of(("gamma", "chat")) == 0.5
    assert weights.version == before + 1
    weights.follow_knob({("beta",): 3.0})  # the same knob again (a catch-up) changes nothing
    assert weights.table == {("beta",): 3.0, ("gamma", "chat"): 0.5}


def test_a_bad_weight_in_the_knob_changes_nothing() -> None:
    weights = Weights()
    weights.follow_knob({("acme",): 4.0})
    version = weights.version
    with pytest.raises(ValueError, match="beta must be > 0"):
        weights.follow_knob({("gamma",): 2.0, ("beta",): 0.0})
    assert weights.table == {("acme",): 4.0} and weights.version == version
    assert weights.knob_nodes == {("acme",)}
