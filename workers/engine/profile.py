"""Latency profiles: what a model on a given accelerator costs per engine step.

A profile is a YAML data file in ``workers/engine/profiles/<name>.yaml`` naming the model (kind,
hidden size, layer count, how its units are counted), the coefficients of the step-time formula,
the engine defaults (``max_num_seqs``, ``max_num_batched_tokens``, ``kv_tokens``) and the default
output-length distribution. Every profile cites where its numbers come from in ``source``.

Step-time formula (seconds), for one engine step (one forward pass of the continuous batch)::

    step = step_overhead
         + prefill_overhead       * [prefill_tokens > 0]
         + prefill_per_token      * prefill_tokens
         + decode_per_seq         * decode_seqs
         + decode_per_ctx_token   * decode_ctx_tokens

- ``step_overhead``: fixed cost of any non-empty step — scheduling, kernel launches, sampling and
  reading every weight once from HBM (what makes a batch-1 decode step cost ~10 ms on an A100).
- ``prefill_overhead``: extra fixed cost of a step that carries prompt tokens (eager/piecewise
  graphs instead of the full decode CUDA graph).
- ``prefill_per_token``: compute cost of one prompt token (prefill is compute-bound, linear in
  tokens for the chunk sizes vLLM schedules).
- ``decode_per_seq``: growth of a decode step with batch size (per-sequence compute, sampling).
- ``decode_per_ctx_token``: attention reading the KV cache: per context token of every decoding
  sequence (``decode_ctx_tokens`` = sum of their context lengths).

An empty step costs nothing. Optional multiplicative jitter with coefficient of variation
``jitter_cv`` is applied by the engine from its seeded RNG, not here: ``LatencyModel`` is pure.

Output lengths (``output_len``): for requests that do not fix their length, ``n_out`` is drawn
from a log-normal distribution whose *mean* is ``mean`` tokens and whose underlying normal has
standard deviation ``sigma`` (``sigma = 0`` gives ``round(mean)`` every time), rounded to an
integer and clipped to ``[min_tokens, max_tokens]``.
"""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from workers.engine.diffusion import GenerationRule
from workers.engine.vision import ImageTokenRule

PROFILES_DIR = Path(__file__).with_name("profiles")


class ModelInfo(BaseModel):
    """The served model: identity, kind and the sizes that price its tokens (Unified Token)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    kind: Literal["llm", "vlm", "image", "video", "audio"] = "llm"
    hidden_size: int = Field(gt=0)
    num_layers: int = Field(gt=0)
    max_model_len: int = Field(gt=0)
    units: str = "tokens"
    output_unit_tokens: int = Field(default=1, gt=0)
    """How many model tokens one output unit stands for (e.g. latent patches per denoising step)."""
    image_tokens: ImageTokenRule | None = None
    """How an input image counts as tokens (VLMs; `workers/engine/vision.py`)."""
    generation: GenerationRule | None = None
    """Steps and sizes of an image-generation model (`workers/engine/diffusion.py`)."""


class OutputLenDist(BaseModel):
    """Log-normal output length with the given mean, rounded and clipped to [min_tokens, max]."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mean: float = Field(gt=0)
    sigma: float = Field(default=0.0, ge=0)
    min_tokens: int = Field(default=1, ge=1)

    def sample(self, rng: random.Random, max_tokens: int) -> int:
        """Draw one output length in ``[min_tokens, max_tokens]`` (``max_tokens`` wins if lower)."""
        if self.sigma == 0.0:
            n = round(self.mean)
        else:
            mu = math.log(self.mean) - self.sigma * self.sigma / 2.0
            n = round(math.exp(rng.gauss(mu, self.sigma)))
        return max(1, min(max_tokens, max(self.min_tokens, n)))


class LatencyProfile(BaseModel):
    """One model on one accelerator: step-time coefficients, engine defaults, output lengths."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    description: str
    source: str = Field(min_length=1)
    model: ModelInfo
    step_overhead: float = Field(ge=0)
    prefill_overhead: float = Field(default=0.0, ge=0)
    prefill_per_token: float = Field(ge=0)
    decode_per_seq: float = Field(ge=0)
    decode_per_ctx_token: float = Field(ge=0)
    jitter_cv: float = Field(default=0.0, ge=0)
    max_num_seqs: int = Field(gt=0)
    max_num_batched_tokens: int = Field(gt=0)
    kv_tokens: int = Field(gt=0)
    output_len: OutputLenDist


def list_profiles() -> list[str]:
    """Names of the bundled profiles, sorted."""
    return sorted(p.stem for p in PROFILES_DIR.glob("*.yaml"))


def load_profile(name_or_path: str) -> LatencyProfile:
    """Load a bundled profile by name, or a profile file by path; validated, extra keys refused."""
    path = Path(name_or_path)
    if not (path.suffix in (".yaml", ".yml") and path.exists()):
        path = PROFILES_DIR / f"{name_or_path}.yaml"
        if not path.exists():
            known = ", ".join(list_profiles())
            raise ValueError(f"unknown latency profile {name_or_path!r} (known: {known})")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"latency profile {path}: cannot be read: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ValueError(f"latency profile {path}: not valid YAML{where}: {problem}") from None
    try:
        return LatencyProfile.model_validate(data)
    except ValidationError as exc:
        raise ValueError(f"latency profile {path}: {_first_problem(exc)}") from None


def _first_problem(exc: ValidationError) -> str:
    """`field: why`, and how many other problems there are (one line for a command line)."""
    errors = exc.errors()
    first = errors[0]
    field = ".".join(str(part) for part in first["loc"]) or "(document)"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{field}: {first['msg']}{more}"


class LatencyModel:
    """Pure step-time function of a profile (see the module docstring for the formula).

    ``speed`` divides every step time (``--speed X`` runs X times faster than the profile).
    The same arguments always give the same result; jitter is the engine's business.
    """

    __slots__ = ("_ctx", "_dseq", "_overhead", "_p_over", "_p_tok", "jitter_cv", "profile")

    def __init__(self, profile: LatencyProfile, speed: float = 1.0) -> None:
        if speed <= 0:
            raise ValueError("speed must be > 0")
        self.profile = profile
        self.jitter_cv = profile.jitter_cv
        self._overhead = profile.step_overhead / speed
        self._p_over = profile.prefill_overhead / speed
        self._p_tok = profile.prefill_per_token / speed
        self._dseq = profile.decode_per_seq / speed
        self._ctx = profile.decode_per_ctx_token / speed

    def step_time(self, prefill_tokens: int, decode_seqs: int, decode_ctx_tokens: int) -> float:
        """Seconds one step takes with this many prompt tokens and decoding sequences."""
        if prefill_tokens <= 0 and decode_seqs <= 0:
            return 0.0
        t = self._overhead + self._dseq * decode_seqs + self._ctx * decode_ctx_tokens
        if prefill_tokens > 0:
            t += self._p_over + self._p_tok * prefill_tokens
        return t

    def decode_tokens_per_s(self, batch: int, ctx_per_seq: int) -> float:
        """Steady-state decode throughput of ``batch`` sequences each attending ``ctx_per_seq``."""
        return batch / self.step_time(0, batch, batch * ctx_per_seq)
