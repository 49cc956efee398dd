"""Unified Token factors (docs/algorithms.md §0.3)."""

from __future__ import annotations

import pytest

from control_plane.contracts.events import Complete, decode
from control_plane.core.job import Slo
from control_plane.core.policy import CostModel
from control_plane.core.unified import ModelShape, unified_cost, unified_tokens, unit_factor
from control_plane.recorder.rows import request_row
from control_plane.sim.records import RequestRecord
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


def test_one_price_for_the_scheduler_the_recorder_and_the_simulator() -> None:
    """Text, vision (image tokens in n_in) and image generation (steps in n_out) requests are
    charged the same by the live policies' cost model, the recorder's row and the simulator's
    record: all three call `unified_cost`."""
    for n_in, n_out, factor in [(300, 120, 1.0), (900, 80, 0.766), (40, 56, 1152.0)]:
        expected = unified_cost(n_in, n_out, factor)
        assert expected == pytest.approx(factor * (n_in + 2 * n_out))
        j = job("x", n_in=n_in, unit_factor=factor)
        assert CostModel().input_cost(j) + CostModel().output_cost(j, n_out) == expected
        event = decode(
            {"type": "complete", "id": "r", "status": "ok", "tenant": "t", "arrival": 1.0,
             "dispatched": 1.5, "finished": 2.0, "n_in": n_in, "n_out": n_out,
             "unit_factor": factor}
        )  # fmt: skip
        assert isinstance(event, Complete)
        row = request_row(event, None)
        assert row is not None and row.unified_cost == pytest.approx(expected)
        record = RequestRecord("r", "t", "a", "g", "m", None, 0.0, n_in, n_out, Slo(), factor)
        record.dispatched, record.n_out = 0.5, n_out
        assert record.service() == pytest.approx(expected)
