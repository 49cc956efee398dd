"""Placement registry: `least_loaded`, `round_robin`, `kv_aware`, `kairos_slots`, or any
`module:Class`."""

from __future__ import annotations

from typing import Any

from control_plane.core.placement import Placement
from control_plane.core.plugins import PluginRegistry

PLACEMENTS: PluginRegistry[Placement] = PluginRegistry("placement", Placement)
PLACEMENTS.register("least_loaded", "control_plane.placement.least_loaded:LeastLoadedPlacement")
PLACEMENTS.register("round_robin", "control_plane.placement.round_robin:RoundRobinPlacement")
PLACEMENTS.register("kv_aware", "control_plane.placement.kv_aware:KvAwarePlacement")
PLACEMENTS.register("kairos_slots", "control_plane.placement.kairos_slots:KairosSlotsPlacement")


def build_placement(name: str, params: dict[str, Any] | None = None) -> Placement:
    """Instantiate placement `name` with validated params (unknown keys rejected)."""
    cls = PLACEMENTS.resolve(name)
    return cls(PLACEMENTS.params(name, cls, params))


def names() -> list[str]:
    return PLACEMENTS.names()
