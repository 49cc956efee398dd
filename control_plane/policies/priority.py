"""Static priority tiers."""

from __future__ import annotations

from typing import ClassVar

from control_plane.core.job import Job
from control_plane.policies.ordered import OrderedPolicy
from control_plane.policies.queues import SortKey


class PriorityPolicy(OrderedPolicy):
    """Smallest `tier` first (0 is most urgent), FCFS within a tier.

    Guarantee: a job is never passed by a job of a less urgent tier that it could have run
    instead; a lower tier can starve while higher tiers keep it busy (no aging).
    """

    name: ClassVar[str] = "priority"

    def key(self, job: Job) -> SortKey:
        return (float(job.tier),)
