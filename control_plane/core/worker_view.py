"""What admission and placement see of one worker: a pure, immutable snapshot.

The live scheduler builds these from the Redis worker registry, its own in-flight records and
the scraped `vllm:*` metrics; the simulator builds them from its engine instances.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True, slots=True)
class WorkerView:
    """One worker at one instant. Scraped fields may lag the scheduler's own counts."""

    id: str
    model: str
    max_num_seqs: int
    kv_tokens: int
    """KV-cache capacity in tokens (`M_cap`)."""
    url: str = ""
    healthy: bool = True
    draining: bool = False
    inflight: int = 0
    """Requests the scheduler has dispatched here and not yet seen finish."""
    inflight_tokens: int = 0
    """Sum of the tokens admission reserved for those requests (prompt + predicted output)."""
    running: int = 0
    waiting: int = 0
    kv_usage: float = 0.0
    """Scraped KV-cache usage, 0..1."""
    preemptions: int = 0
    last_preemption_at: float | None = None
    prefilling: int = 0
    """In-flight requests that have not yet reported a first output token (in prefill, or
    queued in the engine before it)."""
    prefill_tokens: int = 0
    """Their prompt tokens: the prefill work this worker still has in front of it."""
    max_model_len: int | None = None
    """The context it holds for its model (scraped from `/v1/models`); None when unknown."""

    def serves(self, model: str) -> bool:
        """Healthy, not draining, and serving `model`."""
        return self.healthy and not self.draining and self.model == model

    def with_dispatch(self, reserved_tokens: int, n_in: int = 0) -> WorkerView:
        """This view after one more dispatch (so the next decision of a cycle sees it)."""
        return replace(
            self,
            inflight=self.inflight + 1,
            inflight_tokens=self.inflight_tokens + reserved_tokens,
            prefilling=self.prefilling + 1,
            prefill_tokens=self.prefill_tokens + n_in,
        )

    def load(self) -> float:
        """In-flight requests relative to the worker's concurrency limit."""
        return self.inflight / max(1, self.max_num_seqs)
