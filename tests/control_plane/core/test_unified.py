"""Unified Token factors (docs/algorithms.md §0.3)."""

from __future__ import annotations

import pytest

from control_plane.core.policy import CostModel
from control_plane.core.unified import ModelShape, unified_tokens, unit_factor
from tests.control_plane.policies.jobs import job

BASE = ModelShape("llm", hidden_size=4096, num_layers=32)


def test_base_model_tokens_cost_one_and_bigger_models_cost_more() -> None:
    assert unit_factor(BASE, BASE) == 1.0
    vlm = ModelShape("vlm", hidden_size=8192, num_layers=48)
    assert unit_factor(vlm, BASE) == pytest.approx(2 * 1.5)
    assert unified_tokens(100, unit_factor(vlm, BASE)) == pytest.approx(300.0)


def test_operator_override_wins_and_nonsense_is_rejected() -> None:
    assert unit_factor(ModelShape("image", 1, 1, unified_cost_factor=7.5), BASE) == 7.5
    with pytest.raises(ValueError):
        unit_factor(ModelShape("image", 1, 1, unified_cost_factor=0.0), BASE)
    with pytest.raises(ValueError):
        unit_factor(ModelShape("llm", 0, 32), BASE)


def test_cost_model_prices_tokens_in_unified_units() -> None:
    cost = CostModel()
    j = job("x", n_in=10, unit_factor=2.5)
    assert cost.input_cost(j) == 25.0
    assert cost.output_cost(j, 4) == 20.0
