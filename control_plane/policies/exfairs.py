"""ExFairS — experiential fairness (docs/algorithms.md §4)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from control_plane.core.job import Job
from control_plane.core.ledger import Node
from control_plane.core.policy import Admit, Policy, PolicyContext, arrival_order
from control_plane.policies.credits import Transfer, exchange_credits
from control_plane.policies.proportional_queue import ProportionalQueue
from control_plane.policies.queues import DuplicateJobError
from control_plane.policies.safi import safi_scores


class ExfairsParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    level: int = Field(1, ge=1, le=3)
    """The client: 1 = tenant, 2 = application, 3 = agent."""
    alpha: float = Field(0.7, ge=0.0, le=1.0)
    beta: float = Field(0.1, gt=0.0)
    round_s: float = Field(5.0, gt=0.0)
    exchange_scale: float = Field(5.0, gt=0.0)
    """`R = round(exchange_scale · ΔSAFI)` (eq. 6 of the paper: ⌊Δ/2 · 10⌋)."""
    credit_bound: int = Field(100, ge=1)
    insert_multiplier: float = Field(1.0, ge=0.0)
    p_max: int = Field(32, ge=0)
    usage: Literal["raises", "lowers"] = "raises"
    """How usage moves priority in the credit exchange. `raises` (the paper): the exchange
    ranks clients by SAFI, which grows with usage, so heavy clients can gain priority
    (docs/algorithms.md §4.5). `lowers`: it ranks them by `α · SLO + (1 − α) · (1 − Usage)`,
    so light clients gain priority, as under VTC. SAFI itself is the same metric either way."""


class ExfairsPolicy(Policy):
    """One queue; a new request enters by proportional priority enqueueing (Algorithm 2).

    Its priority is `−resource` of its client at arrival. Every `round_s` (in `tick`), active
    clients — those with queued requests or with service or completions in the ledger's
    window — trade credit for resource by Algorithm 1: the worst SAFI (SLO violations, usage)
    gains resource from the best while their SAFI gap is at least β. Dequeue takes the first
    admissible request from the head. Guarantees: credits and resources are conserved and
    bounded by `credit_bound`; no enqueue jumps more than `p_max` places, so a request is never
    overtaken once `p_max` requests queue behind it and the head always drains.
    """

    name: ClassVar[str] = "exfairs"
    Params: ClassVar[type[BaseModel]] = ExfairsParams

    def __init__(self, ctx: PolicyContext, params: BaseModel | None = None) -> None:
        super().__init__(ctx, params)
        self._queue = ProportionalQueue(self._p().insert_multiplier, self._p().p_max)
        self._next_round: float | None = None
        self._last_safi: dict[Node, float] = {}
        self._last_transfers: list[Transfer] = []
        self._saved_order: dict[str, tuple[int, int]] = {}
        self._clients: Counter[Node] = Counter()
        self._level = self._p().level
        """Queued jobs per client (the clients a credit round counts as active)."""

    def _p(self) -> ExfairsParams:
        assert isinstance(self.params, ExfairsParams)
        return self.params

    def client(self, job: Job) -> Node:
        return job.path[: self._level]

    def priority(self, job: Job) -> int:
        account = self.ctx.ledger.find_account(self.client(job))
        return -account.resource if account is not None else 0

    def push(self, job: Job, now: float) -> None:
        if job.id in self._queue:
            raise DuplicateJobError(f"job {job.id!r} is already pending")
        self._queue.insert(job, self.priority(job))
        self._clients[self.client(job)] += 1

    def adopt(self, jobs: Iterable[Job], now: float) -> None:
        """Fail-over keeps the saved queue order; other jobs enter by Algorithm 2."""
        saved = self._saved_order
        pending = list(jobs)
        kept = sorted((j for j in pending if j.id in saved), key=lambda j: saved[j.id][0])
        for job in kept:
            self._queue.insert_at(job, saved[job.id][1], len(self._queue))
            self._clients[self.client(job)] += 1
        for job in sorted((j for j in pending if j.id not in saved), key=arrival_order):
            self.push(job, now)
        self._saved_order = {}

    def pop(self, now: float, admit: Admit) -> Job | None:
        return self._left(self._queue.pop_first(admit))

    def remove(self, job_id: str) -> Job | None:
        return self._left(self._queue.remove(job_id))

    def _left(self, job: Job | None) -> Job | None:
        if job is not None:
            clients, client = self._clients, job.path[: self._level]
            left = clients[client] - 1
            if left:
                clients[client] = left
            else:
                del clients[client]
        return job

    def jobs(self) -> Iterable[Job]:
        return [job for job, _ in self._queue]

    def __len__(self) -> int:
        return len(self._queue)

    # -- credit rounds ----------------------------------------------------------------------
    def active_clients(self, now: float) -> list[Node]:
        ledger, level = self.ctx.ledger, self._p().level
        active = set(self._clients)
        for node in ledger.nodes_at(level):
            window = ledger.window(node, now)
            if window.service > 0 or window.completed > 0:
                active.add(node)
        return sorted(active)

    def tick(self, now: float) -> None:
        p = self._p()
        if self._next_round is None:
            self._next_round = now + p.round_s
        if now < self._next_round:
            return
        self._next_round = now + p.round_s
        self.exchange(now)

    def exchange(self, now: float) -> list[Transfer]:
        """Run one credit round now (Algorithm 1) and return its transfers."""
        p = self._p()
        clients = self.active_clients(now)
        self._last_safi = safi_scores(self.ctx.ledger, clients, now, p.alpha)
        need = self._last_safi
        if p.usage == "lowers":
            need = safi_scores(self.ctx.ledger, clients, now, p.alpha, usage_lowers=True)
        self._last_transfers = exchange_credits(
            self.ctx.ledger, need, p.beta, p.exchange_scale, p.credit_bound
        )
        return self._last_transfers

    def state(self) -> dict[str, Any]:
        accounts = self.ctx.ledger.accounts()
        return {
            "next_round": self._next_round,
            "order": [[job.id, priority] for job, priority in self._queue],
            "clients": [
                {
                    "node": list(node),
                    "safi": safi,
                    "credit": accounts[node].credit if node in accounts else 0,
                    "resource": accounts[node].resource if node in accounts else 0,
                }
                for node, safi in sorted(self._last_safi.items())
            ],
            "transfers": [
                {"taker": list(t.taker), "giver": list(t.giver), "amount": t.amount}
                for t in self._last_transfers
            ],
        }

    def load_state(self, state: dict[str, Any]) -> None:
        self._next_round = state.get("next_round")
        order = state.get("order", [])
        self._saved_order = {job_id: (i, int(p)) for i, (job_id, p) in enumerate(order)}
        self._last_safi = {tuple(c["node"]): float(c["safi"]) for c in state.get("clients", [])}
