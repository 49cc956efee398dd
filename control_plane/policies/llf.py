"""LLF — least laxity first (docs/algorithms.md §7)."""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel

from control_plane.core.job import Job
from control_plane.core.latency import deadline, total_time
from control_plane.policies.deadline_params import DeadlineParams
from control_plane.policies.ordered import OrderedPolicy
from control_plane.policies.queues import SortKey


class LlfPolicy(OrderedPolicy):
    """Smallest slack `S_r = D_r − now − T_tot` first; ties FCFS.

    `now` is common to every queued job, so the order is that of `D_r − T_tot`, computed at
    push. Serves first the job closest to missing its deadline; no tenant fairness.
    """

    name: ClassVar[str] = "llf"
    Params: ClassVar[type[BaseModel]] = DeadlineParams

    def key(self, job: Job) -> SortKey:
        assert isinstance(self.params, DeadlineParams)
        return (deadline(job, self.params.default_deadline_s) - total_time(job, self.ctx.latency),)
