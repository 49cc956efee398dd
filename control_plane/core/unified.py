"""Unified Token factors (the HMFS paper, §III-B; docs/algorithms.md §0.3).

`U(n, τ) = n · (d_τ / d_base) · (N_τ / N_base)`; the base is Llama-3-8B (4096 hidden, 32
layers), so one of its tokens costs exactly 1. An operator's `unified_cost_factor` overrides
the formula. One behaviour everywhere (gateway, live scheduler, simulator): a model whose
shape is not declared costs what the base costs (factor 1.0); a declared shape or override
that is not positive is an error, never silently priced.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ModelShape:
    """What the model registry declares about a model for pricing its tokens."""

    kind: str = "llm"
    """llm | vlm | image | video | audio."""
    hidden_size: int | None = None
    num_layers: int | None = None
    unified_cost_factor: float | None = None
    """Operator's measured override of the factor."""


BASE_MODEL = ModelShape(kind="llm", hidden_size=4096, num_layers=32)
"""The Unified Token base (Llama-3-8B: 4096 hidden, 32 layers); its token costs exactly 1."""


def unit_factor(model: ModelShape, base: ModelShape = BASE_MODEL) -> float:
    """`U(1, τ) = (d_τ / d_base) · (N_τ / N_base)`: one token of the base model costs 1.

    Non-text modalities are counted in their own tokens (patches, frames × patches) before
    this factor applies; an explicit `unified_cost_factor` wins; an undeclared shape (either
    dimension None) costs 1.0. Raises ValueError for a non-positive override or dimension.
    """
    if model.unified_cost_factor is not None:
        if not model.unified_cost_factor > 0:
            raise ValueError("unified_cost_factor must be > 0")
        return model.unified_cost_factor
    if model.hidden_size is None or model.num_layers is None:
        return 1.0
    if base.hidden_size is None or base.num_layers is None:
        raise ValueError("the base model must declare hidden_size and num_layers")
    if min(model.hidden_size, model.num_layers, base.hidden_size, base.num_layers) <= 0:
        raise ValueError("hidden_size and num_layers must be > 0")
    return (model.hidden_size / base.hidden_size) * (model.num_layers / base.num_layers)


def unified_tokens(n: int, factor: float) -> float:
    """`U(n, τ)` for a model whose factor is `factor`."""
    return n * factor


W_P, W_Q = 1.0, 2.0
"""Default prices of a prompt token and of an output token (an output unit of a non-text
model: a denoising step over an image's latent patches), in base tokens (VTC's 1 : 2)."""


def unified_cost(n_in: int, n_out: int, factor: float, w_p: float = W_P, w_q: float = W_Q) -> float:
    """What a request is charged, in Unified Tokens: `f · (w_p · n_in + w_q · n_out)`.

    The one price of the project: the live scheduler's policies (`CostModel`), the recorder's
    history rows (what `/v1/usage` and the reports sum) and the simulator's records all call
    it, for text, vision (image tokens are in `n_in`) and image generation (units in `n_out`).
    """
    return factor * (w_p * n_in + w_q * n_out)
