"""Policy registry: name → class, plus a `module:Class` escape hatch for operators' own policies.

Each built-in policy lives in `control_plane/policies/<name>.py`, and its registry key equals
the module name. Classes are imported lazily so that listing policies costs nothing.
"""

from __future__ import annotations

import importlib
from typing import Any

from pydantic import ValidationError

from control_plane.policies.base import Policy, PolicyContext

BUILTIN: dict[str, str] = {}
"""name → "module:Class"; filled by `register_builtin` calls at the bottom of this module."""


class UnknownPolicyError(ValueError):
    """The name is neither registered nor an importable `module:Class` Policy."""


class PolicyParamsError(ValueError):
    """Params failed validation; `errors` holds pydantic's per-field errors."""

    def __init__(self, policy: str, errors: list[dict[str, Any]]) -> None:
        self.policy = policy
        self.errors = errors
        fields = ", ".join(".".join(str(p) for p in e["loc"]) + ": " + e["msg"] for e in errors)
        super().__init__(f"invalid params for policy {policy!r}: {fields}")


def register_builtin(name: str, target: str) -> None:
    BUILTIN[name] = target


def names() -> list[str]:
    """Registered policy names, sorted."""
    return sorted(BUILTIN)


def policy_class(name: str) -> type[Policy]:
    """Resolve a registered name or a `module:Class` path to a Policy subclass."""
    target = BUILTIN.get(name, name if ":" in name else None)
    if target is None:
        raise UnknownPolicyError(f"unknown policy {name!r}; registered: {', '.join(names())}")
    module_name, _, attr = target.partition(":")
    try:
        cls = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise UnknownPolicyError(f"cannot import policy {target!r}: {exc}") from exc
    if not (isinstance(cls, type) and issubclass(cls, Policy)):
        raise UnknownPolicyError(f"{target!r} is not a Policy subclass")
    return cls


def build_policy(name: str, ctx: PolicyContext, params: dict[str, Any] | None = None) -> Policy:
    """Instantiate policy `name` with validated `params` (unknown keys are rejected)."""
    cls = policy_class(name)
    try:
        validated = cls.Params.model_validate(params or {})
    except ValidationError as exc:
        raise PolicyParamsError(name, [dict(e) for e in exc.errors()]) from exc
    return cls(ctx, validated)


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
):
    register_builtin(_name, f"control_plane.policies.{_name}:{_cls}")
