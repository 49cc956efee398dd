"""Fitting a latency profile's step-time coefficients to measurements of a real server.

The profile's formula (`workers.engine.profile`) is linear in its five coefficients
`x = (step_overhead, prefill_overhead, prefill_per_token, decode_per_seq, decode_per_ctx_token)`.
Two kinds of measurement pin them down:

- a lone request with an `L`-token prompt: its server-side TTFT is one prefill step,
  `step_overhead + prefill_overhead + prefill_per_token * L` (the server's request handling,
  tokenizer-free here, is absorbed into `prefill_overhead`, as the engine model has no other
  place for it);
- `B` streams arriving together: their mean inter-token latency is `x · F`, where `F` holds the
  mean step features per inter-token gap that the engine model schedules for that run
  (`workers.vllm.step_features`); for short prompts this is one decode step,
  `step_overhead + decode_per_seq * B + decode_per_ctx_token * B * c` with `c` the mean
  context, and for long prompts it also counts the chunked prefills that overlap the decodes.

The fit is non-negative least squares on relative errors (each row divided by its measured
value), so short and long steps count alike. `jitter_cv` is not fitted (the server's histograms
give means, and client-side gaps on a small box measure the box, not the engine).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from scipy.optimize import nnls

COEFFICIENTS = (
    "step_overhead",
    "prefill_overhead",
    "prefill_per_token",
    "decode_per_seq",
    "decode_per_ctx_token",
)


@dataclass(frozen=True)
class PrefillPoint:
    """TTFT (s) of a lone request of `prompt_tokens` tokens: server-side (fitted), client-side,
    and the engine's prefill time alone (for the record)."""

    prompt_tokens: int
    ttft_s: float
    client_ttft_s: float
    engine_prefill_s: float | None


@dataclass(frozen=True)
class DecodePoint:
    """A decode run: `batch` simultaneous requests of `prompt_tokens` + `output_tokens`, their
    mean server ITL and client TPOT (s), and the engine model's mean step features per
    inter-token gap (`workers.vllm.step_features`), so that ITL = coefficients · features."""

    prompt_tokens: int
    batch: int
    output_tokens: int
    itl_s: float
    client_tpot_s: float
    features: tuple[float, float, float, float, float]


@dataclass(frozen=True)
class Fit:
    """Fitted coefficients (seconds) and each point's relative residual (prefill, then decode)."""

    coefficients: dict[str, float]
    residuals: list[float]

    def predict_prefill(self, prompt_tokens: int) -> float:
        """Model TTFT of a lone request (s)."""
        c = self.coefficients
        return c["step_overhead"] + c["prefill_overhead"] + c["prefill_per_token"] * prompt_tokens

    def predict_decode(self, point: DecodePoint) -> float:
        """Model mean inter-token latency (s) of a decode run."""
        return sum(
            self.coefficients[k] * f for k, f in zip(COEFFICIENTS, point.features, strict=True)
        )


def fit_profile(prefill: list[PrefillPoint], decode: list[DecodePoint]) -> Fit:
    """Non-negative relative least squares of the five step-time coefficients."""
    if len(prefill) < 2 or len(decode) < 3:
        raise ValueError("need at least 2 prefill and 3 decode measurements")
    rows = [[1.0, 1.0, float(p.prompt_tokens), 0.0, 0.0] for p in prefill]
    rows += [list(d.features) for d in decode]
    targets = [p.ttft_s for p in prefill] + [d.itl_s for d in decode]
    a, b = np.array(rows), np.array(targets)
    relative = a / b[:, None]
    # Scale columns to comparable magnitudes so NNLS converges well, then undo the scaling.
    scale = np.abs(relative).max(axis=0)
    scale[scale == 0] = 1.0
    solution, _ = nnls(relative / scale, np.ones_like(b))
    x = solution / scale
    residuals = ((a @ x - b) / b).tolist()
    return Fit(dict(zip(COEFFICIENTS, x.tolist(), strict=True)), residuals)


def write_profile(path: Path, fit: Fit, *, kv_tokens: int, source: str, description: str) -> None:
    """Rewrite the profile at `path` with the fitted values; other fields are kept as they are."""
    data: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["description"] = description
    data["source"] = source
    for key, value in fit.coefficients.items():
        data[key] = float(f"{value:.4g}")
    data["kv_tokens"] = kv_tokens
    header = "# Fitted by `arbiter worker fidelity` (workers/vllm/fidelity.py); see `source`.\n"
    body = yaml.safe_dump(data, sort_keys=False, width=96, allow_unicode=True)
    path.write_text(header + body, encoding="utf-8")
