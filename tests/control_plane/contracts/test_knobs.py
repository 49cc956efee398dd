"""Knob values: typed for the knobs the control plane reads, JSON kept for the others."""

from __future__ import annotations

import json

import pytest

from control_plane.contracts.knobs import (
    Fairness,
    KnobChange,
    KnobError,
    KnobValue,
    NodeWeights,
    Other,
    PluginChoice,
    QueueCap,
    SloTargets,
    decode_change,
    decode_knob,
    knob_of,
)

VALUES = [
    ("policy", PluginChoice("exfairs", {"alpha": 0.5, "beta": 0.1})),
    ("admission", PluginChoice("capacity", {"max_concurrency": 4})),
    ("placement", PluginChoice("least_loaded")),
    ("weights", NodeWeights({("acme",): 3.0, ("acme", "chat"): 0.5})),
    ("queue_cap", QueueCap(64)),
    ("slo_defaults", SloTargets(ttft_ms=500.0, e2e_ms=8000.0)),
    ("fairness", Fairness(0.7, 0.1)),
    ("directory", Other(1_700_000_000.5)),
    ("my.plugin", Other([1, {"x": None}])),
]


@pytest.mark.parametrize("name,value", VALUES)
def test_every_knob_round_trips_through_its_json(name: str, value: KnobValue) -> None:
    wire = json.loads(json.dumps(value.to_json()))
    assert decode_knob(name, wire) == value
    change = decode_change({"name": name, "value": wire, "version": 7})
    assert change == KnobChange(name, value, 7)


@pytest.mark.parametrize(
    "name,value,message",
    [
        ("policy", "fcfs", "policy: expected an object, got str"),
        ("policy", {"params": {}}, "policy.name: required"),
        ("policy", {"name": "vtc", "params": [1]}, "policy.params: expected an object"),
        ("placement", {"name": ""}, "placement.name: empty"),
        ("weights", {"acme": "heavy"}, "weights.acme: expected a number"),
        ("queue_cap", {"default": 1.5}, "queue_cap.default: expected an integer"),
        ("slo_defaults", {"ttft_ms": "fast"}, "slo_defaults.ttft_ms: expected a number"),
        ("fairness", {"alpha": float("nan")}, "fairness.alpha: expected a finite number"),
    ],
)
def test_a_bad_knob_is_refused_naming_the_field(name: str, value: object, message: str) -> None:
    with pytest.raises(KnobError, match="^" + message):
        decode_knob(name, value)


def test_knob_of_gives_only_a_value_of_the_asked_type() -> None:
    knobs: dict[str, KnobValue] = {"policy": PluginChoice("vtc"), "weights": Other("odd")}
    assert knob_of(knobs, "policy", PluginChoice) == PluginChoice("vtc")
    assert knob_of(knobs, "weights", NodeWeights) is None  # stored, but not decodable
    assert knob_of(knobs, "fairness", Fairness) is None
    with pytest.raises(KnobError, match=r"^name: required"):
        decode_change({"value": 1})
