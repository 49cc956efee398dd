"""Who may name a plug-in by its module path.

Rule: a policy, admission or placement named `module:Class` makes every gateway (validating
it) and the leader (building it) import that module, running its top-level code on their
event loops — the power of installing code. Only the `admin` role has it; an `operator`
steers with the registered names (`GET /admin/policy` lists them). Guarantee: for any other
caller the request is refused with a 403 before anything is imported.
"""

from __future__ import annotations

import re
from typing import Any

from control_plane.api.operator_auth import Principal
from control_plane.gateway.errors import ApiError

PLUGIN_KNOBS = frozenset({"policy", "admission", "placement", "fairness"})
"""The knobs whose values name plug-ins (the fairness knob carries a policy)."""
_IMPORT_PATH = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")


def refuse_imports(who: Principal, value: Any, param: str) -> None:
    """403 when `who` is not an admin and `value` (any JSON) names a `module:Class`."""
    if who.role == "admin":
        return
    path = _first_import(value)
    if path is not None:
        raise ApiError(
            403,
            f"Only an admin may name a plug-in by its module path ({path!r}); "
            "use a registered name (GET /admin/policy lists them).",
            param=param,
            code="forbidden",
        )


def _first_import(value: Any) -> str | None:
    if isinstance(value, str):
        return value if _IMPORT_PATH.fullmatch(value.strip()) else None
    if isinstance(value, dict):
        items: Any = value.values()
    elif isinstance(value, list):
        items = value
    else:
        return None
    for item in items:
        found = _first_import(item)
        if found is not None:
            return found
    return None
