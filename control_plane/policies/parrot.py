"""Parrot's baseline — first come, first served (docs/algorithms.md §19)."""

from __future__ import annotations

from typing import ClassVar

from control_plane.policies.fcfs import FcfsPolicy


class ParrotPolicy(FcfsPolicy):
    """FCFS under the name the Kairos paper compares against (Parrot serves requests in
    arrival order and dispatches round-robin: pair it with the `round_robin` placement)."""

    name: ClassVar[str] = "parrot"
