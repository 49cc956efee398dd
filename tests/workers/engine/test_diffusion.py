"""An image model's generation rule: sizes it offers, images per request, output units."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from workers.engine import load_profile
from workers.engine.diffusion import (
    GenerationError,
    GenerationRule,
    check_count,
    output_units,
    resolve_size,
)

RULE = GenerationRule(steps=28, sizes=("1024x1024", "1536x1024"), max_images=4)


def test_size_defaults_to_the_first_offered_and_refuses_others_naming_size() -> None:
    assert resolve_size(RULE, None) == "1024x1024"
    assert resolve_size(RULE, "auto") == "1024x1024"
    assert resolve_size(RULE, "1536x1024") == "1536x1024"
    with pytest.raises(GenerationError) as err:
        resolve_size(RULE, "512x512")
    assert err.value.param == "size" and "1536x1024" in str(err.value)


def test_count_is_bounded_and_units_are_images_times_steps() -> None:
    assert check_count(RULE, 4) == 4
    for bad in (0, 5):
        with pytest.raises(GenerationError) as err:
            check_count(RULE, bad)
        assert err.value.param == "n"
    assert output_units(RULE, 3) == 84


def test_a_rule_refuses_malformed_sizes_and_unknown_fields() -> None:
    bad_rules: list[dict[str, object]] = [
        {"sizes": ["big"]}, {"sizes": []}, {"sizes": ["99999x99999"]}, {"steps": 0},
        {"stpes": 28},
    ]  # fmt: skip
    for bad in bad_rules:
        with pytest.raises(ValidationError):
            GenerationRule.model_validate(bad)


def test_the_image_profile_declares_its_rule() -> None:
    model = load_profile("sd-image-a100").model
    assert model.kind == "image" and model.generation == GenerationRule(steps=28)
    assert load_profile("llama3-8b-a100").model.generation is None
