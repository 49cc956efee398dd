"""Has the scheduler leader applied a change yet? (pure: compares what was asked with what
the leader's live view reports; the console polls and shows the answer)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


def policy_applied(asked: Mapping[str, Any], running: Mapping[str, Any] | None) -> bool:
    """True once the leader runs the asked policy with the asked params (params the leader
    fills in by default are not compared)."""
    if not running or running.get("name") != asked.get("name"):
        return False
    have = running.get("params") or {}
    return all(_same(have[k], v) for k, v in (asked.get("params") or {}).items() if k in have)


def weight_applied(node: str, weight: float, live_weights: Mapping[str, Any] | None) -> bool:
    """True once the leader's weight table holds `weight` for `node` ('tenant/app/...')."""
    have = (live_weights or {}).get(node)
    return have is not None and _same(have, weight)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, int | float) and isinstance(b, int | float):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)
    return bool(a == b)
