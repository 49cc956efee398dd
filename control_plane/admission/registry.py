"""Admission registry: `capacity`, `statera`, or any `module:Class` Admission."""

from __future__ import annotations

from typing import Any

from control_plane.core.admission import Admission
from control_plane.core.plugins import PluginRegistry

ADMISSIONS: PluginRegistry[Admission] = PluginRegistry("admission", Admission)
ADMISSIONS.register("capacity", "control_plane.admission.capacity:CapacityAdmission")
ADMISSIONS.register("statera", "control_plane.admission.statera:StateraAdmission")


def build_admission(name: str, params: dict[str, Any] | None = None) -> Admission:
    """Instantiate admission `name` with validated params (unknown keys rejected)."""
    cls = ADMISSIONS.resolve(name)
    return cls(ADMISSIONS.params(name, cls, params))


def names() -> list[str]:
    return ADMISSIONS.names()
