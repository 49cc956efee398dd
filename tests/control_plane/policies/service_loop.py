"""A small deterministic service loop in simulated time, for fairness properties.

One worker holds at most `slots` requests and `kv_tokens` tokens (each running request
reserves `n_in + max_tokens`); every step of `step_s` seconds each running request emits one
output token, charged as it streams. Decisions go through the real `Dispatcher` (policy +
capacity admission with a token fence + placement), which also charges the ledger. This is
the VTC paper's server model, not the engine model: it exists so that these tests need
nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from control_plane.admission.capacity import CapacityAdmission, CapacityParams
from control_plane.core.dispatcher import Dispatcher
from control_plane.core.job import Job, Outcome
from control_plane.core.policy import Policy
from control_plane.core.worker_view import WorkerView
from control_plane.placement.least_loaded import LeastLoadedPlacement

Observer = Callable[["ServiceLoop"], None]


@dataclass
class ServiceLoop:
    policy: Policy
    slots: int
    kv_tokens: int
    step_s: float = 0.05
    now: float = 0.0
    pending: dict[str, Job] = field(default_factory=dict)
    running: dict[str, tuple[Job, int]] = field(default_factory=dict)
    finished: list[Job] = field(default_factory=list)
    queued: dict[tuple[str, ...], int] = field(default_factory=dict)
    """Pending requests per full path (tenant, app, agent)."""

    def __post_init__(self) -> None:
        admission = CapacityAdmission(
            CapacityParams(
                max_concurrency=self.slots, skip_waiting=False, kv_usage_max=1.0, token_fence=1.0
            )
        )
        self.dispatcher = Dispatcher(self.policy, admission, LeastLoadedPlacement())

    def worker(self) -> WorkerView:
        return WorkerView(
            id="w0",
            model="default",
            max_num_seqs=self.slots,
            kv_tokens=self.kv_tokens,
            inflight=len(self.running),
            inflight_tokens=sum(reserved for _, reserved in self.running.values()),
        )

    def backlogged(self, level: int = 1) -> set[tuple[str, ...]]:
        """Clients with queued (not yet dispatched) requests."""
        return {client[:level] for client, count in self.queued.items() if count > 0}

    def run(
        self,
        arrivals: Iterable[Job],
        *,
        max_steps: int = 1_000_000,
        observe: Observer | None = None,
        stop: Callable[[ServiceLoop], bool] | None = None,
    ) -> None:
        """Serve `arrivals` until all finish, `stop` says so, or `max_steps` pass.

        `observe` is called after every event that changes service (a dispatch, a token step).
        """
        incoming = sorted(arrivals, key=lambda j: (j.arrival, j.seq, j.id))
        cursor = 0
        for _ in range(max_steps):
            while cursor < len(incoming) and incoming[cursor].arrival <= self.now:
                job = incoming[cursor]
                self.dispatcher.push(job, self.now)
                self.pending[job.id] = job
                self.queued[job.path] = self.queued.get(job.path, 0) + 1
                cursor += 1
            self.dispatcher.tick(self.now)
            self._dispatch(observe)
            if stop is not None and stop(self):
                return
            if cursor == len(incoming) and not self.pending and not self.running:
                return
            self._step(observe)
            self.now += self.step_s

    def _dispatch(self, observe: Observer | None) -> None:
        while (decision := self.dispatcher.next(self.now, [self.worker()])) is not None:
            job = decision.job
            del self.pending[job.id]
            self.queued[job.path] -= 1
            self.running[job.id] = (job, decision.reserved_tokens)
            if observe is not None:
                observe(self)

    def _step(self, observe: Observer | None) -> None:
        if not self.running:
            return
        for job, _ in list(self.running.values()):
            self.dispatcher.on_tokens(job, 1, self.now)
            if job.n_out >= job.max_tokens:
                del self.running[job.id]
                e2e = self.now + self.step_s - job.arrival
                outcome = Outcome("ok", job.n_in, job.n_out, e2e_s=e2e)
                self.dispatcher.on_finish(job, outcome, self.now)
                self.finished.append(job)
        if observe is not None:
            observe(self)
