"""Two-lane — fast/slow isolation by predicted service time (H-MAS, docs/algorithms.md §8)."""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Iterable
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from control_plane.core.job import Job
from control_plane.core.latency import deadline, total_time
from control_plane.core.policy import Admit, Policy, PolicyContext, arrival_order
from control_plane.policies.deadline_params import DeadlineParams
from control_plane.policies.queues import DuplicateJobError, JobQueue, SortKey


class TwoLaneParams(DeadlineParams):
    threshold_s: float | None = Field(None, gt=0.0)
    """`T_tot` at or below which a job is fast; None = running median of recent `T_tot`."""
    fast_share: float = Field(0.5, ge=0.0, le=1.0)
    """Share of contested dispatch slots reserved for the fast lane."""
    median_window: int = Field(1000, ge=1)


class TwoLanePolicy(Policy):
    """Fast lane (`T_tot ≤ threshold`) and slow lane, each ordered by slack `D_r − now − T_tot`.

    When both lanes have an admissible job, a stride counter gives the fast lane `fast_share`
    of the slots (within one slot at any time); a lane with nothing admissible lends its slot
    to the other. Guarantee: under sustained contention neither lane starves (for
    `0 < fast_share < 1`); long requests cannot block short ones for more than the slow
    lane's share.
    """

    name: ClassVar[str] = "two_lane"
    Params: ClassVar[type[BaseModel]] = TwoLaneParams

    def __init__(self, ctx: PolicyContext, params: BaseModel | None = None) -> None:
        super().__init__(ctx, params)
        p = self._p()
        self._lanes = {True: JobQueue(self._slack), False: JobQueue(self._slack)}
        self._fast_of: dict[str, bool] = {}
        self._credit = 1.0 - p.fast_share
        self._recent: deque[float] = deque(maxlen=p.median_window)
        self._sorted: list[float] = []
        self._saved_lanes: dict[str, bool] = {}

    def _p(self) -> TwoLaneParams:
        assert isinstance(self.params, TwoLaneParams)
        return self.params

    def _slack(self, job: Job) -> SortKey:
        return (deadline(job, self._p().default_deadline_s) - total_time(job, self.ctx.latency),)

    def _observe(self, t_tot: float) -> None:
        if len(self._recent) == self._recent.maxlen:
            del self._sorted[bisect.bisect_left(self._sorted, self._recent[0])]
        self._recent.append(t_tot)
        bisect.insort(self._sorted, t_tot)

    def threshold(self) -> float:
        fixed = self._p().threshold_s
        if fixed is not None:
            return fixed
        n = len(self._sorted)
        return (self._sorted[(n - 1) // 2] + self._sorted[n // 2]) / 2 if n else 0.0

    def _enqueue(self, job: Job, fast: bool) -> None:
        if job.id in self._fast_of:
            raise DuplicateJobError(f"job {job.id!r} is already pending")
        self._lanes[fast].add(job)
        self._fast_of[job.id] = fast

    def push(self, job: Job, now: float) -> None:
        t_tot = total_time(job, self.ctx.latency)
        self._observe(t_tot)
        self._enqueue(job, t_tot <= self.threshold())

    def adopt(self, jobs: Iterable[Job], now: float) -> None:
        for job in sorted(jobs, key=arrival_order):
            if job.id in self._saved_lanes:
                self._enqueue(job, self._saved_lanes[job.id])
            else:
                self.push(job, now)
        self._saved_lanes = {}

    def pop(self, now: float, admit: Admit) -> Job | None:
        fast = self._lanes[True].first(admit)
        slow = self._lanes[False].first(admit)
        if fast is not None and slow is not None:
            share = self._p().fast_share
            self._credit += share
            if share > 0 and self._credit >= 1.0 - 1e-9:
                self._credit -= 1.0
                slow = None
            else:
                fast = None
        job = fast if fast is not None else slow
        if job is not None:
            self._lanes[self._fast_of.pop(job.id)].remove(job.id)
        return job

    def remove(self, job_id: str) -> Job | None:
        fast = self._fast_of.pop(job_id, None)
        return None if fast is None else self._lanes[fast].remove(job_id)

    def jobs(self) -> Iterable[Job]:
        return [*self._lanes[True], *self._lanes[False]]

    def __len__(self) -> int:
        return len(self._fast_of)

    def state(self) -> dict[str, Any]:
        return {
            "credit": self._credit,
            "threshold": self.threshold(),
            "recent": list(self._recent),
            "fast": sorted(i for i, fast in self._fast_of.items() if fast),
            "slow": sorted(i for i, fast in self._fast_of.items() if not fast),
        }

    def load_state(self, state: dict[str, Any]) -> None:
        self._credit = float(state.get("credit", self._credit))
        self._recent.clear()
        self._sorted.clear()
        for t_tot in state.get("recent", []):
            self._observe(float(t_tot))
        lanes = {i: True for i in state.get("fast", [])}
        self._saved_lanes = lanes | {i: False for i in state.get("slow", [])}
