"""The policy interface shared by the live scheduler and the simulator (one policy, two clocks).

A policy orders pending jobs. It does no I/O, reads time only from the `now` it is given, and
keeps state that `snapshot()` renders as JSON. Service accounting that must survive a policy
switch lives in the `Ledger` passed in through `PolicyContext`, not inside the policy.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from control_plane.policies.job import Job, Outcome

Admit = Callable[[Job], bool]


class NoParams(BaseModel):
    """A policy without knobs."""

    model_config = ConfigDict(extra="forbid")


@dataclass
class CostModel:
    """Service price of tokens (ALGORITHMS.md §0): `w_p` per prompt token, `w_q` per output token."""

    w_p: float = 1.0
    w_q: float = 2.0

    def input_cost(self, job: Job) -> float:
        return self.w_p * job.n_in * job.unit_factor

    def output_cost(self, job: Job, n_out: int) -> float:
        return self.w_q * n_out * job.unit_factor


@dataclass
class Weights:
    """Weights per node path prefix: ("t",), ("t", "app"), ("t", "app", "agent"); default 1."""

    table: dict[tuple[str, ...], float] = field(default_factory=dict)

    def of(self, node: tuple[str, ...]) -> float:
        return self.table.get(node, 1.0)

    def set(self, node: tuple[str, ...], weight: float) -> None:
        if weight <= 0:
            raise ValueError(f"weight of {'/'.join(node)} must be > 0, got {weight}")
        self.table[node] = weight


class Policy(ABC):
    """Orders pending jobs; subclasses document their ordering rule and guarantee."""

    name: ClassVar[str]
    Params: ClassVar[type[BaseModel]] = NoParams

    def __init__(self, ctx: PolicyContext, params: BaseModel | None = None) -> None:
        self.ctx = ctx
        self.params = params if params is not None else self.Params()

    @abstractmethod
    def push(self, job: Job, now: float) -> None:
        """Enqueue a newly arrived (or re-queued) job."""

    @abstractmethod
    def pop(self, now: float, admit: Admit) -> Job | None:
        """Remove and return the next job for which `admit(job)` is true, or None."""

    @abstractmethod
    def remove(self, job_id: str) -> Job | None:
        """Withdraw a pending job (client gone, timeout); None if it is not pending."""

    @abstractmethod
    def jobs(self) -> Iterable[Job]:
        """Every pending job, for a zero-downtime switch to another policy."""

    def __len__(self) -> int:
        return sum(1 for _ in self.jobs())

    def on_dispatch(self, job: Job, now: float) -> None:  # noqa: B027 - optional hook
        """Called after `pop` returned `job` and it was placed on a worker."""

    def on_tokens(self, job: Job, n_out_delta: int, now: float) -> None:  # noqa: B027
        """Output tokens streamed back for a running job."""

    def on_finish(self, job: Job, outcome: Outcome, now: float) -> None:  # noqa: B027
        """A running job ended."""

    def tick(self, now: float) -> None:  # noqa: B027 - optional periodic hook
        """Periodic work (credit rounds, recomputations); called at least once a second."""

    def snapshot(self) -> dict[str, Any]:
        """A JSON view of the policy's state for the console and the Redis checkpoint."""
        return {"name": self.name, "params": self.params.model_dump(), "pending": len(self)}

    def restore(self, state: dict[str, Any]) -> None:  # noqa: B027 - optional
        """Reload what `snapshot` saved (counters); pending jobs are re-pushed separately."""


@dataclass
class PolicyContext:
    """What a policy may read besides jobs: weights, prices and the shared ledger."""

    weights: Weights = field(default_factory=Weights)
    cost: CostModel = field(default_factory=CostModel)
    ledger: Any = None
    """`control_plane.policies.ledger.Ledger` once it exists; typed loosely to avoid a cycle."""
