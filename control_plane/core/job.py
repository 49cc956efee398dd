"""The scheduler's view of one request: what every policy, admission and placement sees."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Slo:
    """Per-request latency targets in seconds; `None` means not set."""

    ttft_s: float | None = None
    tpot_s: float | None = None
    e2e_s: float | None = None

    def is_set(self) -> bool:
        return self.ttft_s is not None or self.tpot_s is not None or self.e2e_s is not None

    def to_json(self) -> dict[str, float | None]:
        return {"ttft_s": self.ttft_s, "tpot_s": self.tpot_s, "e2e_s": self.e2e_s}


@dataclass(slots=True)
class Job:
    """One queued or running request.

    Identity and hierarchy are fixed at arrival; `n_out`, `dispatched_at` and `worker` are
    filled in by the scheduler as the request runs. `seq` is a monotone arrival number that
    ends every tie in a total order `(key, arrival, seq, id)`.
    """

    id: str
    tenant: str
    arrival: float
    n_in: int
    max_tokens: int
    app: str = "default"
    agent: str = "default"
    model: str = "default"
    seq: int = 0
    workflow: str | None = None
    upstream: str | None = None
    task: str | None = None
    tier: int = 0
    """Static urgency: smaller is more urgent (vLLM's convention)."""
    slo: Slo = field(default_factory=Slo)
    unit_factor: float = 1.0
    """Unified Token factor of `model`: a token's cost in base tokens (docs/algorithms.md §0.3)."""
    predicted_out: int | None = None
    workflow_start: float | None = None
    n_out: int = 0
    dispatched_at: float | None = None
    worker: str | None = None
    min_context: int | None = None
    """The context a worker must hold to take the request whole (its prompt plus the
    `max_tokens` sent, 1 when none is), set only when that is more than the shortest context
    among its model's workers: the scheduler then sends it only to a worker that holds it, or
    to the longest when none does."""

    @property
    def path(self) -> tuple[str, str, str]:
        """The node path tenant → application → agent."""
        return (self.tenant, self.app, self.agent)

    @property
    def expected_out(self) -> int:
        """Best guess of output length: the prediction, else `max_tokens`."""
        return self.predicted_out if self.predicted_out is not None else self.max_tokens

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "tenant": self.tenant,
            "app": self.app,
            "agent": self.agent,
            "model": self.model,
            "arrival": self.arrival,
            "seq": self.seq,
            "n_in": self.n_in,
            "max_tokens": self.max_tokens,
            "workflow": self.workflow,
            "upstream": self.upstream,
            "task": self.task,
            "tier": self.tier,
            "slo": self.slo.to_json(),
            "unit_factor": self.unit_factor,
            "predicted_out": self.predicted_out,
            "workflow_start": self.workflow_start,
            "n_out": self.n_out,
            "dispatched_at": self.dispatched_at,
            "worker": self.worker,
            "min_context": self.min_context,
        }


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a dispatched request ended, as measured by the gateway (seconds)."""

    status: str
    """`ok`, `error`, `aborted` (client gone) or `timeout`."""
    n_in: int
    n_out: int
    ttft_s: float | None = None
    tpot_s: float | None = None
    e2e_s: float | None = None
    queue_s: float | None = None

    def violated(self, slo: Slo) -> bool:
        """True when any target that `slo` sets was exceeded (or the request failed)."""
        if self.status != "ok":
            return slo.is_set()
        checks = ((slo.ttft_s, self.ttft_s), (slo.tpot_s, self.tpot_s), (slo.e2e_s, self.e2e_s))
        return any(t is not None and v is not None and v > t for t, v in checks)
