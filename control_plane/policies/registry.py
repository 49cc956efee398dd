"""Policy registry: name → class, plus a `module:Class` escape hatch for operators' own policies.

Each built-in policy lives in `control_plane/policies/<name>.py`, and its registry key equals
the module name. One `PluginRegistry` (the same type admission and placement use); classes are
imported lazily so that listing policies costs nothing.
"""

from __future__ import annotations

from typing import Any

from control_plane.core.plugins import PluginParamsError, PluginRegistry, UnknownPluginError
from control_plane.core.policy import Policy, PolicyContext


class UnknownPolicyError(UnknownPluginError):
    """The name is neither registered nor an importable `module:Class` Policy."""


class PolicyParamsError(PluginParamsError):
    """Params failed validation; `errors` holds pydantic's per-field errors."""

    def __init__(self, policy: str, errors: list[dict[str, Any]]) -> None:
        super().__init__(policy, errors)
        self.policy = policy
        fields = ", ".join(".".join(str(p) for p in e["loc"]) + ": " + e["msg"] for e in errors)
        self.args = (f"invalid params for policy {policy!r}: {fields}",)


POLICIES: PluginRegistry[Policy] = PluginRegistry(
    "policy", Policy, unknown=UnknownPolicyError, invalid=PolicyParamsError
)


def register_builtin(name: str, target: str) -> None:
    POLICIES.register(name, target)


def names() -> list[str]:
    """Registered policy names, sorted."""
    return POLICIES.names()


def policy_class(name: str) -> type[Policy]:
    """Resolve a registered name or a `module:Class` path to a Policy subclass."""
    return POLICIES.resolve(name)


def build_policy(name: str, ctx: PolicyContext, params: dict[str, Any] | None = None) -> Policy:
    """Instantiate policy `name` with validated `params` (unknown keys are rejected)."""
    cls = policy_class(name)
    return cls(ctx, POLICIES.params(name, cls, params))


for _name, _cls in (
    ("fcfs", "FcfsPolicy"),
    ("rr", "RrPolicy"),
    ("vtc", "VtcPolicy"),
    ("wfq", "WfqPolicy"),
    ("hmfs", "HmfsPolicy"),
    ("exfairs", "ExfairsPolicy"),
    ("edf", "EdfPolicy"),
    ("sjf", "SjfPolicy"),
    ("llf", "LlfPolicy"),
    ("two_lane", "TwoLanePolicy"),
    ("priority", "PriorityPolicy"),
    ("kairos", "KairosPolicy"),
    ("parrot", "ParrotPolicy"),
    ("ayo", "AyoPolicy"),
):
    register_builtin(_name, f"control_plane.policies.{_name}:{_cls}")
