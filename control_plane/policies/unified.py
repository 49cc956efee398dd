"""Unified Token factors (the HMFS paper, §III-B; docs/algorithms.md §0.3)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ModelShape:
    """What the model registry declares about a model for pricing its tokens."""

    kind: str
    """llm | vlm | image | video | audio."""
    hidden_size: int
    num_layers: int
    unified_cost_factor: float | None = None
    """Operator's measured override of the factor."""


def unit_factor(model: ModelShape, base: ModelShape) -> float:
    """`U(1, τ) = (d_τ / d_base) · (N_τ / N_base)`: one token of the base model costs 1.

    Non-text modalities are counted in their own tokens (patches, frames × patches) before
    this factor applies; an explicit `unified_cost_factor` wins.
    """
    if model.unified_cost_factor is not None:
        if model.unified_cost_factor <= 0:
            raise ValueError("unified_cost_factor must be > 0")
        return model.unified_cost_factor
    if min(model.hidden_size, model.num_layers, base.hidden_size, base.num_layers) <= 0:
        raise ValueError("hidden_size and num_layers must be > 0")
    return (model.hidden_size / base.hidden_size) * (model.num_layers / base.num_layers)


def unified_tokens(n: int, factor: float) -> float:
    """`U(n, τ)` for a model whose factor is `factor`."""
    return n * factor
