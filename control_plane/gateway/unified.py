"""Unified Token factor of a model (docs/algorithms.md §0.3; the HMFS paper, §III-B).

`U(n, τ) = n · (d_τ / d_base) · (N_τ / N_base)`; the base is Llama-3-8B (4096 hidden, 32 layers),
so one of its tokens costs exactly 1. An operator's `unified_cost_factor` overrides the formula.
"""

from __future__ import annotations

BASE_HIDDEN = 4096
BASE_LAYERS = 32


def unit_factor(
    hidden_size: int | None, num_layers: int | None, override: float | None = None
) -> float:
    """Cost of one token of the model in base tokens; 1.0 when the shape is unknown."""
    if override is not None and override > 0:
        return override
    if not hidden_size or not num_layers:
        return 1.0
    return (hidden_size / BASE_HIDDEN) * (num_layers / BASE_LAYERS)
