"""Node weights: the default, a set, and a replacement that is all or nothing."""

from __future__ import annotations

import pytest

from control_plane.core.policy import Weights


def test_replace_is_exactly_the_table_and_bumps_the_version() -> None:
    weights = Weights()
    weights.set(("acme",), 4.0)
    before = weights.version
    weights.replace({("beta", "chat"): 0.5})
    assert weights.of(("acme",)) == 1.0 and weights.of(("beta", "chat")) == 0.5
    assert weights.version == before + 1


def test_a_bad_weight_in_a_replacement_changes_nothing() -> None:
    weights = Weights()
    weights.set(("acme",), 4.0)
    version = weights.version
    with pytest.raises(ValueError, match="beta must be > 0"):
        weights.replace({("gamma",): 2.0, ("beta",): 0.0})
    assert weights.table == {("acme",): 4.0} and weights.version == version
