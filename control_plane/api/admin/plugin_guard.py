"""Who may name a plug-in by its module path.

Rule: a policy, admission or placement named `module:Class` makes every gateway (validating
it) and the leader (building it) import that module, running its top-level code on their
event loops — the power of installing code. Only the `admin` role has it; an `operator`
steers with the registered names (`GET /admin/policy` lists them). Guarantee: for any other
caller the request is refused with a 403 before anything is imported.
"""

from __future__ import annotations

from typing import Any

from control_plane.api.operator_auth import Principal
from control_plane.gateway.errors import ApiError

PLUGIN_KNOBS = frozenset({"policy", "admission", "placement"})
"""The knobs whose value (`{"name", "params"}`) names a plug-in."""


def refuse_imports(who: Principal, name: Any, param: str) -> None:
    """403 when `who` is not an admin and `name` — the plug-in name the registry will resolve
    — has a ':' (the registry imports any such name; no registered name has one)."""
    if who.role == "admin" or not isinstance(name, str) or ":" not in name:
        return
    raise ApiError(
        403,
        f"Only an admin may name a plug-in by its module path ({name[:80]!r}); "
        "use a registered name (GET /admin/policy lists them).",
        param=param,
        code="forbidden",
    )


def plugin_name(value: Any) -> Any:
    """The plug-in name inside a knob's value (`{"name": …}` or the bare name)."""
    return value.get("name") if isinstance(value, dict) else value
