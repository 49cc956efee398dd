"""First come, first served."""

from __future__ import annotations

from typing import ClassVar

from control_plane.policies.ordered import OrderedPolicy


class FcfsPolicy(OrderedPolicy):
    """Arrival order: `(arrival, seq, id)`; an inadmissible job is skipped, not waited for.

    Guarantee: no job is overtaken by a later arrival unless that arrival was admissible while
    the earlier job was not (e.g. it targets another model). No fairness between tenants.
    """

    name: ClassVar[str] = "fcfs"
