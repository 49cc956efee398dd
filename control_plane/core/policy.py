"""The policy interface shared by the live scheduler and the simulator (one policy, two clocks).

A policy orders pending jobs. It does no I/O, reads time only from the `now` it is given, and
keeps state that `snapshot()` renders as JSON. Service accounting that must survive a policy
switch lives in the `Ledger` passed in through `PolicyContext`, not inside the policy.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from control_plane.core.job import Job, Outcome
from control_plane.core.latency import LatencyModel
from control_plane.core.latency_fit import FittedLatency
from control_plane.core.ledger import CounterPlan, Ledger, Node, OutputCharge
from control_plane.core.unified import W_P, W_Q, unified_cost
from control_plane.core.workflows.orchestrator import Orchestrator

Admit = Callable[[Job], bool]
Refuses = Callable[[str], bool]
"""`refuses(model)`: True promises that `admit` refuses every job of `model` for the rest of
this `pop`, without side effects (see `refusals`)."""
TokenReport = tuple[Job, int]
"""One running job's new output tokens: `(job, n_out_delta)`."""


def refusals(admit: Admit) -> Refuses | None:
    """The `refuses` query of `admit` when it offers one (the dispatcher's does), else None.

    A policy may skip the jobs of a refused model without calling `admit` on them: `admit`
    would have returned False and changed nothing, so the result of `pop` is the same. The
    promise holds for the rest of one `pop` only (a model, once refused, stays refused).
    """
    refuses = getattr(admit, "refuses", None)
    return refuses if callable(refuses) else None


class StopPop(Exception):
    """Raised by an `admit` callable to end a `pop` early: no further job can be admitted.

    Policies change no state before `admit` has returned True, so an aborted `pop` leaves the
    policy exactly as it was; the caller treats it as `pop` returning None.
    """


class NoParams(BaseModel):
    """A policy without knobs."""

    model_config = ConfigDict(extra="forbid")


@dataclass
class CostModel:
    """Service price of tokens: `w_p` per prompt token, `w_q` per output token.

    Prices are in Unified Tokens: a token of a model with `unit_factor` f costs f base tokens
    (docs/algorithms.md §0.2–§0.3).
    """

    w_p: float = W_P
    w_q: float = W_Q

    def input_cost(self, job: Job) -> float:
        return unified_cost(job.n_in, 0, job.unit_factor, self.w_p, self.w_q)

    def output_cost(self, job: Job, n_out: int) -> float:
        return unified_cost(0, n_out, job.unit_factor, self.w_p, self.w_q)


@dataclass
class Weights:
    """Weights per node path prefix: ("t",), ("t", "app"), ("t", "app", "agent"); default 1.

    Change them through `set` or `follow_knob` only: each bumps `version`, which tells caches
    of weights apart.
    """

    table: dict[Node, float] = field(default_factory=dict)
    version: int = field(default=0, compare=False)
    knob_nodes: frozenset[Node] = field(default=frozenset(), compare=False)
    """The nodes the operator's `weights` knob named when last followed."""

    def of(self, node: Node) -> float:
        return self.table.get(node, 1.0)

    def set(self, node: Node, weight: float) -> None:
        if weight <= 0:
            raise ValueError(f"weight of {'/'.join(node)} must be > 0, got {weight}")
        self.table[node] = weight
        self.version += 1

    def follow_knob(self, table: dict[Node, float]) -> None:
        """Take the operator's `weights` knob: set each node it names; a node the previous
        knob named and this one does not (deleted) is back to the default 1. Nodes only
        requests' envelopes set are left as they are (the knob names only the weights an
        operator published). All or nothing: a weight ≤ 0 raises `ValueError` first."""
        for node, weight in table.items():
            if weight <= 0:
                raise ValueError(f"weight of {'/'.join(node)} must be > 0, got {weight}")
        for node in self.knob_nodes - table.keys():
            self.table.pop(node, None)
        self.table.update(table)
        self.knob_nodes = frozenset(table)
        self.version += 1


@dataclass
class PolicyContext:
    """What a policy may read besides jobs: weights, prices, latency estimates, the ledger.

    The same context (and so the same ledger) is handed to the next policy on a switch, which
    is how virtual counters, credits and SLO windows survive it.
    """

    weights: Weights = field(default_factory=Weights)
    cost: CostModel = field(default_factory=CostModel)
    ledger: Ledger = field(default_factory=Ledger)
    latency: LatencyModel = field(default_factory=FittedLatency)
    workflows: Orchestrator = field(default_factory=Orchestrator)
    """What is learned from finished workflows (agent graphs, latency windows, priorities)."""


class Policy(ABC):
    """Orders pending jobs; subclasses document their ordering rule and guarantee.

    Contract (tested for every registered policy): `pop` returns a job satisfying `admit`, and
    returns None only when no pending job does (work conservation); the order is a
    deterministic function of the calls made; every pushed job leaves exactly once, through
    `pop` or `remove`; `jobs()` lists every pending job so another policy can `adopt` them;
    `pop` changes no state before `admit` accepted a job (so `StopPop` may abort it).
    """

    name: ClassVar[str]
    Params: ClassVar[type[BaseModel]] = NoParams

    def __init__(self, ctx: PolicyContext, params: BaseModel | None = None) -> None:
        self.ctx = ctx
        self.params = params if params is not None else self.Params()

    @abstractmethod
    def push(self, job: Job, now: float) -> None:
        """Enqueue a newly arrived (or re-queued) job; a job id already pending is an error."""

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

    def adopt(self, jobs: Iterable[Job], now: float) -> None:
        """Take over the pending jobs of the previous policy (a switch or a fail-over).

        The default replays them as arrivals in arrival order; policies with counters override
        it so that a switch does not rewrite the fairness memory kept in the ledger.
        """
        for job in sorted(jobs, key=arrival_order):
            self.push(job, now)

    def on_dispatch(self, job: Job, now: float) -> None:  # noqa: B027 - optional hook
        """Called after `pop` returned `job` and it was placed on a worker."""

    def on_tokens(self, job: Job, n_out_delta: int, now: float) -> None:  # noqa: B027
        """Output tokens streamed back for a running job."""

    def on_tokens_batch(self, charges: Sequence[OutputCharge], now: float) -> None:
        """One progress report: `on_tokens(job, n_out, now)` for each charge, in order.

        Each charge is `(job, job.path, n_out, cost)` with `cost = ctx.cost.output_cost(job,
        n_out)`. The dispatcher calls it only when `counter_plan()` is None.
        """
        if type(self).on_tokens is Policy.on_tokens:
            return  # the default on_tokens ignores tokens: nothing to replay
        for job, _, n_out, _ in charges:
            self.on_tokens(job, n_out, now)

    def counter_plan(self) -> CounterPlan | None:
        """What `on_tokens` does to the ledger's counters, when it is a `CounterPlan`.

        The dispatcher then charges a batched report's counters together with its service, in
        one pass, instead of calling `on_tokens_batch`; the counters end up exactly the same.
        None (the default) when `on_tokens` does anything else.
        """
        return None

    def on_finish(self, job: Job, outcome: Outcome, now: float) -> None:  # noqa: B027
        """A running job ended."""

    def tick(self, now: float) -> None:  # noqa: B027 - optional periodic hook
        """Periodic work (credit rounds, recomputations); called at least once a second."""

    def snapshot(self) -> dict[str, Any]:
        """A JSON view of the policy's state for the console and the Redis checkpoint."""
        return {
            "name": self.name,
            "params": self.params.model_dump(mode="json"),
            "pending": len(self),
            "state": self.state(),
        }

    def state(self) -> dict[str, Any]:
        """Policy-private state beyond the pending jobs and the ledger (JSON)."""
        return {}

    def restore(self, snapshot: dict[str, Any]) -> None:
        """Reload what `snapshot()` saved; pending jobs are then handed over with `adopt`."""
        self.load_state(snapshot.get("state") or {})

    def load_state(self, state: dict[str, Any]) -> None:  # noqa: B027 - optional
        """Inverse of `state()`."""


def arrival_order(job: Job) -> tuple[float, int, str]:
    """The FCFS total order: arrival time, then arrival sequence number, then id."""
    return (job.arrival, job.seq, job.id)


def switch_policy(old: Policy, new: Policy, now: float) -> Policy:
    """Hand every pending job of `old` to `new` (zero downtime) and return `new`."""
    new.adopt(list(old.jobs()), now)
    return new
