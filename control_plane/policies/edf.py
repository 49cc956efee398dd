"""EDF — earliest deadline first (docs/algorithms.md §5)."""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel

from control_plane.core.job import Job
from control_plane.core.latency import deadline
from control_plane.policies.deadline_params import DeadlineParams
from control_plane.policies.ordered import OrderedPolicy
from control_plane.policies.queues import SortKey


class EdfPolicy(OrderedPolicy):
    """Smallest deadline `D_r = a_r + SLO_ttft + SLO_tpot · l_pred` (or `a_r + SLO_e2e`) first.

    Ties FCFS. Guarantee: if some order meets every deadline on one server, EDF's does; no
    fairness between tenants, and jobs without a deadline wait behind all that have one.
    """

    name: ClassVar[str] = "edf"
    Params: ClassVar[type[BaseModel]] = DeadlineParams

    def key(self, job: Job) -> SortKey:
        assert isinstance(self.params, DeadlineParams)
        return (deadline(job, self.params.default_deadline_s),)
