"""One record per request: what happened to it, in the scenario's time (sim and live alike).

The simulator fills records from engine events; the live bench fills them from client-side
timings and response headers. Metrics are computed from records only, so a simulated and a
live run of the same scenario are measured by the same code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from control_plane.core.job import Outcome, Slo
from control_plane.core.unified import W_P, W_Q, unified_cost

FINAL_STATUSES = ("ok", "error", "aborted", "timeout", "withdrawn", "rejected")
"""`ok` served; `error` failed; `aborted` cut off while running (end of run); `timeout`
withdrawn by the queue timeout; `withdrawn` still queued when the run ended; `rejected` turned
away at the door because its tenant's queue was full (the gateway's 429)."""


@dataclass(slots=True)
class RequestRecord:
    """A request and its fate; times are absolute scenario seconds, None when not reached."""

    id: str
    tenant: str
    app: str
    agent: str
    model: str
    cls: str | None
    arrival: float
    n_in: int
    max_tokens: int
    slo: Slo
    unit_factor: float = 1.0
    task: str | None = None
    status: str = "queued"
    dispatched: float | None = None
    first_token: float | None = None
    finished: float | None = None
    n_out: int = 0
    worker: str | None = None
    true_out: int | None = None
    """What the model generates when let run (the engine model's EOS), never shown to the
    scheduler; None: `max_tokens`."""
    workflow: str | None = None

    @property
    def length(self) -> int:
        """The output the request asks the engine for: `true_out`, else `max_tokens`."""
        return self.max_tokens if self.true_out is None else self.true_out

    @property
    def queue_s(self) -> float | None:
        return None if self.dispatched is None else self.dispatched - self.arrival

    @property
    def ttft_s(self) -> float | None:
        return None if self.first_token is None else self.first_token - self.arrival

    @property
    def e2e_s(self) -> float | None:
        if self.finished is None or self.status != "ok":
            return None
        return self.finished - self.arrival

    @property
    def tpot_s(self) -> float | None:
        """Mean time between output tokens after the first (vLLM's TPOT); 0 for one token."""
        if self.finished is None or self.first_token is None or self.status != "ok":
            return None
        if self.n_out <= 1:
            return 0.0
        return (self.finished - self.first_token) / (self.n_out - 1)

    def outcome(self) -> Outcome:
        return Outcome(
            status=self.status if self.status in FINAL_STATUSES else "error",
            n_in=self.n_in,
            n_out=self.n_out,
            ttft_s=self.ttft_s,
            tpot_s=self.tpot_s,
            e2e_s=self.e2e_s,
            queue_s=self.queue_s,
        )

    def violated(self) -> bool:
        """Outcome semantics: any set target exceeded, or not served while carrying targets."""
        return self.outcome().violated(self.slo)

    def service(self, w_p: float = W_P, w_q: float = W_Q) -> float:
        """Unified Tokens charged: the prompt once dispatched, plus every output token."""
        prompt = self.n_in if self.dispatched is not None else 0
        return unified_cost(prompt, self.n_out, self.unit_factor, w_p, w_q)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "tenant": self.tenant,
            "app": self.app,
            "agent": self.agent,
            "model": self.model,
            "class": self.cls,
            "arrival": self.arrival,
            "n_in": self.n_in,
            "max_tokens": self.max_tokens,
            "true_out": self.true_out,
            "slo": self.slo.to_json(),
            "unit_factor": self.unit_factor,
            "task": self.task,
            "status": self.status,
            "dispatched": self.dispatched,
            "first_token": self.first_token,
            "finished": self.finished,
            "n_out": self.n_out,
            "worker": self.worker,
        }
