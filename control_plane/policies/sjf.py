"""SJF — shortest predicted job first (docs/algorithms.md §6)."""

from __future__ import annotations

from typing import ClassVar

from control_plane.core.job import Job
from control_plane.core.latency import total_time
from control_plane.policies.ordered import OrderedPolicy
from control_plane.policies.queues import SortKey


class SjfPolicy(OrderedPolicy):
    """Smallest predicted service time `T_tot = t̂_ttft + t̂_tpot · l_pred` first; ties FCFS.

    `T_tot` comes from the context's latency model at push time. Minimises mean latency when
    predictions are right; long jobs can starve under a sustained stream of short ones.
    """

    name: ClassVar[str] = "sjf"

    def key(self, job: Job) -> SortKey:
        return (total_time(job, self.ctx.latency),)
