"""Arbiter request tags: hierarchy, workflow and SLO hints from headers or body `metadata`.

Rule: a header wins over the same key in `metadata`. Keys are case-insensitive and accepted as
`X-Arbiter-App` or plain `app` inside `metadata`. Names must match `NAME_PATTERN` in full,
priorities are integers 0..`MAX_TIER`, SLO targets finite positive ms up to `MAX_SLO_MS`;
anything else is a 400 naming the header (or `metadata.<key>`).

Priority comes only from tenant records: a request is never more urgent than the records of its
tenant, application and agent make it (or the configured SLO defaults where the records set no
target). Tags may only *relax* that: `X-Arbiter-Priority` can ask for a larger (less urgent)
tier, and an `X-Arbiter-SLO-*` header can ask for a larger (less urgent) target than the
record's. A header can neither shorten a target nor add one where the records set none (no
target = least urgent), so no caller can buy the front of an SLO-aware queue with headers.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from control_plane.gateway.bounds import MAX_SLO_MS, MAX_TIER, NAME_PATTERN, is_name
from control_plane.gateway.errors import ApiError

_FIELDS = {
    "app": "App",
    "agent": "Agent",
    "workflow": "Workflow",
    "upstream": "Upstream",
    "task": "Task",
    "slo-ttft-ms": "SLO-TTFT-Ms",
    "slo-tpot-ms": "SLO-TPOT-Ms",
    "slo-e2e-ms": "SLO-E2E-Ms",
    "priority": "Priority",
}
_NAMED = ("app", "agent", "workflow", "upstream", "task")
_INTEGER = re.compile(r"[0-9]{1,9}")
_DECIMAL = re.compile(r"[0-9]{1,20}(\.[0-9]{1,20})?([eE][+-]?[0-9]{1,3})?")


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


@dataclass(frozen=True, slots=True)
class _Raw:
    """One tag as sent: its value and where (`X-Arbiter-…` header or `metadata.<key>`)."""

    value: Any
    param: str


def _key(name: str) -> str:
    return name.lower().removeprefix("x-arbiter-").replace("_", "-")


def _raw_tags(headers: Mapping[str, str], metadata: Mapping[str, Any] | None) -> dict[str, _Raw]:
    raw: dict[str, _Raw] = {}
    for key, value in (metadata or {}).items():
        if (name := _key(str(key))) in _FIELDS:
            raw[name] = _Raw(value, f"metadata.{key}")
    for field, title in _FIELDS.items():
        value = headers.get(f"x-arbiter-{field}")
        if value is not None:
            raw[field] = _Raw(value, f"X-Arbiter-{title}")
    return raw


def _invalid(tag: _Raw, rule: str) -> ApiError:
    shown = repr(tag.value) if len(repr(tag.value)) <= 80 else repr(tag.value)[:77] + "..."
    return ApiError(
        400, f"{tag.param} must be {rule}, got {shown}", param=tag.param, code="invalid_value"
    )


def _name(raw: dict[str, _Raw], field: str) -> str | None:
    tag = raw.get(field)
    if tag is None:
        return None
    if not isinstance(tag.value, str) or not is_name(tag.value):
        raise _invalid(tag, f"a name matching {NAME_PATTERN}")
    return tag.value


def _number(value: Any, pattern: re.Pattern[str]) -> float | None:
    """A JSON number (not a bool) or a plain decimal string, as float; None if neither."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return float(value) if abs(value) <= 2**53 else math.inf  # float() overflows past 1e308
    if isinstance(value, float):
        return value
    if isinstance(value, str) and pattern.fullmatch(value):
        return float(value)
    return None


def _priority(raw: dict[str, _Raw]) -> int | None:
    tag = raw.get("priority")
    if tag is None:
        return None
    value = _number(tag.value, _INTEGER)
    if value is None or not value.is_integer() or not 0 <= value <= MAX_TIER:
        raise _invalid(tag, f"an integer tier 0..{MAX_TIER} (larger = less urgent)")
    return int(value)


def _millis(raw: dict[str, _Raw], field: str) -> float | None:
    tag = raw.get(field)
    if tag is None:
        return None
    value = _number(tag.value, _DECIMAL)
    if value is None or not math.isfinite(value) or not 0 < value <= MAX_SLO_MS:
        raise _invalid(tag, f"a number of ms in (0, {MAX_SLO_MS:.0f}]")
    return value


def read_tags(headers: Mapping[str, str], metadata: Mapping[str, Any] | None) -> RequestTags:
    """Parse and validate tags; raises ApiError(400) naming the offending header or key."""
    raw = _raw_tags(headers, metadata)
    return RequestTags(
        app=_name(raw, "app"),
        agent=_name(raw, "agent"),
        workflow=_name(raw, "workflow"),
        upstream=_name(raw, "upstream"),
        task=_name(raw, "task"),
        slo_ttft_ms=_millis(raw, "slo-ttft-ms"),
        slo_tpot_ms=_millis(raw, "slo-tpot-ms"),
        slo_e2e_ms=_millis(raw, "slo-e2e-ms"),
        priority=_priority(raw),
    )


def clamp_tier(record_tier: int, requested: int | None) -> int:
    """Effective tier: a caller may ask to be *less* urgent (larger), never more."""
    return record_tier if requested is None else max(record_tier, requested)


def relax(record_ms: float | None, requested_ms: float | None) -> float | None:
    """Effective SLO target: the record's (or configured default's); a request may only make it
    larger (less urgent), and cannot add a target where the records set none."""
    if record_ms is None or requested_ms is None:
        return record_ms
    return max(record_ms, requested_ms)


def strip_tags(metadata: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """`metadata` without Arbiter's keys (None when nothing else is left)."""
    if not metadata:
        return None
    rest = {k: v for k, v in metadata.items() if _key(str(k)) not in _FIELDS}
    return rest or None
