"""Plain records exchanged with the engine: requests in, step results out, and its configuration."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from workers.engine.profile import LatencyProfile


@dataclass(slots=True)
class EngineRequest:
    """A request as the engine sees it: ``n_out`` is the exact number of tokens it will generate.

    ``priority`` matters in ``priority`` mode only (lower value first, ties by arrival then id).
    """

    id: str
    n_in: int
    n_out: int
    priority: int = 0
    arrival: float = 0.0


@dataclass(frozen=True, slots=True)
class TokenEvent:
    """Tokens one step produced for one request (``n`` is 1: no speculative decoding)."""

    req_id: str
    n: int
    first: bool
    finished: bool


@dataclass(frozen=True, slots=True)
class StepResult:
    """One engine step: when it ran, what it produced, whom it preempted and what it computed."""

    start: float
    end: float
    tokens: tuple[TokenEvent, ...]
    preempted: tuple[str, ...]
    prefill_tokens: int
    decode_seqs: int


@dataclass(frozen=True, slots=True)
class RequestState:
    """A snapshot of one request inside the engine (``generated`` counts tokens already emitted)."""

    id: str
    status: Literal["waiting", "running"]
    n_in: int
    n_out: int
    generated: int
    computed_tokens: int
    kv_blocks: int
    preemptions: int


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """vLLM scheduler knobs: batch limits, KV capacity in tokens (blocks of ``block_size``)."""

    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    kv_tokens: int = 100_000
    block_size: int = 16
    scheduling: Literal["fcfs", "priority"] = "fcfs"
    enable_chunked_prefill: bool = True

    def __post_init__(self) -> None:
        if self.max_num_seqs < 1 or self.max_num_batched_tokens < 1 or self.block_size < 1:
            raise ValueError("max_num_seqs, max_num_batched_tokens and block_size must be >= 1")
        if self.kv_tokens < self.block_size:
            raise ValueError("kv_tokens must hold at least one block")
        if self.scheduling not in ("fcfs", "priority"):
            raise ValueError(f"unknown scheduling mode {self.scheduling!r}")

    @property
    def num_blocks(self) -> int:
        """KV blocks available: ``kv_tokens // block_size``."""
        return self.kv_tokens // self.block_size

    @classmethod
    def from_profile(cls, p: LatencyProfile, **overrides: Any) -> EngineConfig:
        """The profile's engine defaults, with any field overridden by keyword."""
        values: dict[str, Any] = {
            "max_num_seqs": p.max_num_seqs,
            "max_num_batched_tokens": p.max_num_batched_tokens,
            "kv_tokens": p.kv_tokens,
        }
        values.update(overrides)
        return cls(**values)
