"""One request of a scenario's workload, as drawn (`sim/workload.py`, `sim/workflow_draw.py`)."""

from __future__ import annotations

from dataclasses import dataclass

from control_plane.core.job import Slo
from control_plane.sim.records import RequestRecord

DEFAULT_MAX_TOKENS = 2048
"""The cap a class without `max_tokens` sends: a generous client default, far above the
shipped scenarios' answers, as clients that cannot know the length set it."""


@dataclass(frozen=True, slots=True)
class RequestSpec:
    """One request of the workload: who, when, how long, which model, which targets.

    `n_out` is the true output length (engine only, at most the cap: an answer is cut there);
    `max_tokens` the client's cap, what the scheduler sees (None: `DEFAULT_MAX_TOKENS`, what a
    client that sets none gets — never the true length).
    """

    id: str
    arrival: float
    tenant: str
    app: str
    agent: str
    model: str
    cls: str | None
    task: str | None
    n_in: int
    n_out: int
    slo: Slo
    tier: int
    max_tokens: int | None = None
    workflow: str | None = None
    upstream: str | None = None
    """The agent whose call triggered this one (workflow calls)."""
    after: str | None = None
    """The call whose end releases this one; its `arrival` is set then (end + `think_s`)."""
    think_s: float = 0.0

    def __post_init__(self) -> None:
        if self.n_out > self.cap:
            raise ValueError(f"request {self.id}: n_out {self.n_out} exceeds its cap {self.cap}")

    @property
    def cap(self) -> int:
        """The `max_tokens` the client sends."""
        return DEFAULT_MAX_TOKENS if self.max_tokens is None else self.max_tokens

    def record(self, unit_factor: float) -> RequestRecord:
        """A fresh record of this request, as the simulator and the live bench both keep it."""
        return RequestRecord(
            self.id,
            self.tenant,
            self.app,
            self.agent,
            self.model,
            self.cls,
            self.arrival,
            self.n_in,
            self.cap,
            self.slo,
            unit_factor,
            self.task,
            true_out=self.n_out,
            workflow=self.workflow,
        )
