"""Validation of the editable fields of tenants, applications and agents."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final, TypedDict

from storage.errors import InvalidValueError

MIN_WEIGHT: Final = 1e-6
MAX_WEIGHT: Final = 1e6
"""A fair-share weight's range: policies charge `cost / weight`, so a weight near zero would
drive a counter to infinity (which no checkpoint can hold) and one near infinity to nothing."""
INT32_MAX: Final = 2**31 - 1
"""Largest value of a SQL INTEGER column (PostgreSQL's is 32-bit)."""
INT64_MAX: Final = 2**63 - 1
"""Largest value of a SQL BIGINT column."""
MAX_TIER: Final = 1000
"""Priority tiers are 0 (most urgent) .. MAX_TIER, for records and `X-Arbiter-Priority`."""
MAX_SLO_MS: Final = 86_400_000.0
"""An SLO target longer than a day is a mistake, not a target."""
MAX_RATE: Final = 1e6
"""Requests per second."""


class AppFields(TypedDict, total=False):
    """Settable fields of an application (all optional; unset = default or inherited)."""

    weight: float
    slo_ttft_ms: float | None
    slo_tpot_ms: float | None
    slo_e2e_ms: float | None


class AgentFields(AppFields, total=False):
    """Settable fields of an agent; `priority_tier` overrides the tenant's tier."""

    priority_tier: int | None


class TenantFields(AppFields, total=False):
    """Settable fields of a tenant."""

    priority_tier: int
    queue_cap: int | None
    rate_limit_rps: float | None
    token_budget: int | None


SLO_FIELDS: Final = ("slo_ttft_ms", "slo_tpot_ms", "slo_e2e_ms")
TENANT_FIELDS: Final = frozenset(
    {"weight", "priority_tier", "queue_cap", "rate_limit_rps", "token_budget", *SLO_FIELDS}
)
APP_FIELDS: Final = frozenset({"weight", *SLO_FIELDS})
AGENT_FIELDS: Final = frozenset({"weight", "priority_tier", *SLO_FIELDS})

_POSITIVE_OR_NONE: Final = {"rate_limit_rps": MAX_RATE, **dict.fromkeys(SLO_FIELDS, MAX_SLO_MS)}
"""Number fields: greater than 0, at most this (the admin API's rule, so every entry point
stores only what the API would take)."""
_INT_OR_NONE: Final = {"priority_tier": (0, MAX_TIER), "queue_cap": (1, INT32_MAX),
                       "token_budget": (0, INT64_MAX)}  # fmt: skip
"""Integer fields: from, to (the API's rule; the columns' own range at most)."""


def check_fields(
    values: Mapping[str, Any], allowed: frozenset[str], *, not_null: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """Reject unknown fields and out-of-domain values; returns a plain dict of the values."""
    unknown = sorted(set(values) - allowed)
    if unknown:
        raise InvalidValueError(f"unknown or read-only field(s): {', '.join(unknown)}")
    for name, value in values.items():
        if value is None and name in not_null:
            raise InvalidValueError(f"{name} cannot be null")
        _check_one(name, value)
    return dict(values)


def _check_one(name: str, value: Any) -> None:
    if name == "weight":
        if not _is_number(value) or not MIN_WEIGHT <= value <= MAX_WEIGHT:
            raise InvalidValueError(
                f"weight must be a number from {MIN_WEIGHT:g} to {MAX_WEIGHT:g}, got {value!r}"
            )
    elif (high := _POSITIVE_OR_NONE.get(name)) is not None:
        if value is not None and (not _is_number(value) or not 0 < value <= high):
            raise InvalidValueError(
                f"{name} must be a number > 0 and ≤ {high:g} or null, got {value!r}"
            )
    elif (bounds := _INT_OR_NONE.get(name)) is not None and value is not None:
        low, top = bounds
        if not (isinstance(value, int) and not isinstance(value, bool) and low <= value <= top):
            raise InvalidValueError(
                f"{name} must be an integer from {low} to {top} or null, got {value!r}"
            )


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


NAME_PATTERN: Final = r"^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}$"
"""Tenant, application, agent, operator, workflow, model and worker names (JSON-schema syntax,
where `$` is the end of the text): safe in a URL path, a node path ('/' joins levels) and a
Redis key, so every entry point — API, CLI, console — can address what another created."""
_NAME: Final = re.compile(NAME_PATTERN[1:-1])


def is_name(value: str) -> bool:
    """True when all of `value` is a valid name (Python's `$` would accept a trailing newline)."""
    return _NAME.fullmatch(value) is not None


def check_name(name: str, what: str) -> str:
    """A name matching `NAME_PATTERN` in full, else `InvalidValueError` naming `what`."""
    if not isinstance(name, str) or not is_name(name):
        raise InvalidValueError(
            f"{what} name must be 1–128 letters, digits or '_.:-', starting with a letter or "
            f"digit, got {name!r}"
        )
    return name
