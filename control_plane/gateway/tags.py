"""Arbiter request tags: hierarchy, workflow and SLO hints from headers or body `metadata`.

Rule: a header wins over the same key in `metadata`. Keys are case-insensitive and accepted as
`X-Arbiter-App` or plain `app` inside `metadata`. Tags can only *narrow* what the tenant's
records allow: a priority can make a request less urgent, an SLO can only be tighter.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from control_plane.api.errors import ApiError

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}$")
_FIELDS = (
    "app",
    "agent",
    "workflow",
    "upstream",
    "task",
    "slo-ttft-ms",
    "slo-tpot-ms",
    "slo-e2e-ms",
    "priority",
)
_NAMED = ("app", "agent", "workflow", "upstream", "task")


@dataclass(frozen=True, slots=True)
class RequestTags:
    """Validated tags; None means not given."""

    app: str | None = None
    agent: str | None = None
    workflow: str | None = None
    upstream: str | None = None
    task: str | None = None
    slo_ttft_ms: float | None = None
    slo_tpot_ms: float | None = None
    slo_e2e_ms: float | None = None
    priority: int | None = None


def _raw_tags(headers: Mapping[str, str], metadata: Mapping[str, Any] | None) -> dict[str, str]:
    raw: dict[str, str] = {}
    for key, value in (metadata or {}).items():
        name = key.lower().removeprefix("x-arbiter-").replace("_", "-")
        if name in _FIELDS:
            raw[name] = str(value)
    for field in _FIELDS:
        value = headers.get(f"x-arbiter-{field}")
        if value is not None:
            raw[field] = value
    return raw


def _positive(raw: dict[str, str], field: str) -> float | None:
    if field not in raw:
        return None
    try:
        value = float(raw[field])
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ApiError(
            400,
            f"X-Arbiter-{field.upper()} must be a positive number of ms, got {raw[field]!r}",
            param=f"X-Arbiter-{field}",
            code="invalid_value",
        )
    return value


def read_tags(headers: Mapping[str, str], metadata: Mapping[str, Any] | None) -> RequestTags:
    """Parse and validate tags; raises ApiError(400) naming the offending tag."""
    raw = _raw_tags(headers, metadata)
    for field in _NAMED:
        if field in raw and not _NAME.match(raw[field]):
            raise ApiError(
                400,
                f"X-Arbiter-{field.title()} must match {_NAME.pattern}",
                param=f"X-Arbiter-{field.title()}",
                code="invalid_value",
            )
    priority = None
    if "priority" in raw:
        try:
            priority = int(raw["priority"])
        except ValueError:
            raise ApiError(
                400,
                "X-Arbiter-Priority must be an integer (smaller = more urgent)",
                param="X-Arbiter-Priority",
                code="invalid_value",
            ) from None
    return RequestTags(
        app=raw.get("app"),
        agent=raw.get("agent"),
        workflow=raw.get("workflow"),
        upstream=raw.get("upstream"),
        task=raw.get("task"),
        slo_ttft_ms=_positive(raw, "slo-ttft-ms"),
        slo_tpot_ms=_positive(raw, "slo-tpot-ms"),
        slo_e2e_ms=_positive(raw, "slo-e2e-ms"),
        priority=priority,
    )


def clamp_tier(record_tier: int, requested: int | None) -> int:
    """Effective tier: a caller may ask to be *less* urgent (larger), never more."""
    return record_tier if requested is None else max(record_tier, requested)


def tighten(default_ms: float | None, requested_ms: float | None) -> float | None:
    """Effective SLO target: the request may only tighten the configured one."""
    if requested_ms is None:
        return default_ms
    return requested_ms if default_ms is None else min(default_ms, requested_ms)


def strip_tags(metadata: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """`metadata` without Arbiter's keys (None when nothing else is left)."""
    if not metadata:
        return None
    rest = {
        k: v
        for k, v in metadata.items()
        if k.lower().removeprefix("x-arbiter-").replace("_", "-") not in _FIELDS
    }
    return rest or None
