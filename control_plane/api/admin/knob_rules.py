"""The knobs the admin API knows: what each means, its JSON schema, and its validation.

A value is validated before it is stored, so a subscriber never sees a knob it cannot apply;
an invalid value is refused with a 422 listing every bad field (`value.<field>`). Knobs not
listed here may hold any JSON value (operators' own plug-ins read them). `directory` and
`weights` are written by the admin API itself (weights through `PUT /admin/weights/{node}`,
so that SQL and the scheduler never disagree) and cannot be set directly.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from control_plane.admission.registry import ADMISSIONS
from control_plane.api.admin.deps import FieldErrors
from control_plane.contracts.knobs import PLUGIN_NAME_MAX
from control_plane.control.meta import AUTO, AutoParams
from control_plane.core.plugins import PluginParamsError, PluginRegistry, UnknownPluginError
from control_plane.core.policy import PolicyContext
from control_plane.gateway.bounds import INT32_MAX, Millis
from control_plane.gateway.errors import ApiError
from control_plane.placement.registry import PLACEMENTS
from control_plane.policies.registry import PolicyParamsError, UnknownPolicyError, build_policy
from control_plane.policies.registry import names as registry_names

KNOB_NAME = re.compile(r"[a-z][a-z0-9_.\-]{0,63}")
"""Knob names (matched in full: a trailing newline is not part of a name)."""
READ_ONLY = {
    "directory": "bumped by the admin API after tenant/key changes",
    "weights": "set per node with PUT /admin/weights/{node}",
}


class FairnessKnob(BaseModel):
    """SAFI's α and the credit-exchange threshold β (docs/algorithms.md §4.1, §4.2)."""

    model_config = ConfigDict(extra="forbid")
    alpha: float = Field(0.7, ge=0.0, le=1.0)
    beta: float = Field(0.1, gt=0.0, le=1.0)


class SloDefaultsKnob(BaseModel):
    """Cluster-wide SLO targets (ms) for requests whose tenant, app and agent set none."""

    model_config = ConfigDict(extra="forbid")
    ttft_ms: Millis | None = None
    tpot_ms: Millis | None = None
    e2e_ms: Millis | None = None


class QueueCapKnob(BaseModel):
    """Queue cap for tenants whose record sets none (per-tenant caps live on the tenant)."""

    model_config = ConfigDict(extra="forbid")
    default: int = Field(256, ge=1, le=INT32_MAX)


class PluginKnob(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=PLUGIN_NAME_MAX)  # what the knob's readers take
    params: dict[str, Any] = Field(default_factory=dict)


def _model(model: type[BaseModel], value: Any, prefix: str = "value.") -> BaseModel:
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        raise FieldErrors([dict(e) for e in exc.errors()], prefix=prefix) from exc


def validate_policy(name: str, params: dict[str, Any] | None) -> dict[str, Any]:
    """`{"name", "params"}` with params validated (and defaults filled) by the policy's model;
    `auto` (the meta-controller) by `AutoParams`, every policy of its pool registered."""
    if name == AUTO:
        return {"name": AUTO, "params": _auto_params(params)}
    try:
        policy = build_policy(name, PolicyContext(), params)
    except UnknownPolicyError as exc:
        raise FieldErrors([{"loc": ("name",), "msg": str(exc)}]) from exc
    except PolicyParamsError as exc:
        raise FieldErrors(exc.errors, prefix="params.") from exc
    return {"name": name, "params": policy.params.model_dump(mode="json")}


def _plugin(registry: PluginRegistry[Any], value: Any) -> dict[str, Any]:
    knob = _model(PluginKnob, value)
    assert isinstance(knob, PluginKnob)
    try:
        cls = registry.resolve(knob.name)
        params = registry.params(knob.name, cls, knob.params)
    except UnknownPluginError as exc:
        raise FieldErrors([{"loc": ("name",), "msg": str(exc)}], prefix="value.") from exc
    except PluginParamsError as exc:
        raise FieldErrors(exc.errors, prefix="value.params.") from exc
    return {"name": knob.name, "params": params.model_dump(mode="json")}


def _plugin_schema(registry: PluginRegistry[Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"name": {"enum": registry.names()}, "params": {"type": "object"}},
        "params_by_name": {
            n: registry.resolve(n).Params.model_json_schema() for n in registry.names()
        },
    }


@dataclass(frozen=True, slots=True)
class KnobRule:
    description: str
    schema: Callable[[], dict[str, Any]]
    validate: Callable[[Any], Any]


def _dumped(model: type[BaseModel]) -> Callable[[Any], Any]:
    return lambda value: _model(model, value).model_dump(mode="json")


def _policy_value(value: Any) -> dict[str, Any]:
    knob = _model(PluginKnob, value)
    assert isinstance(knob, PluginKnob)
    try:
        return validate_policy(knob.name, knob.params)
    except FieldErrors as exc:
        raise FieldErrors(
            [{"loc": tuple(e["param"].split(".")), "msg": e["message"]} for e in exc.errors],
            prefix="value.",
        ) from exc


RULES: dict[str, KnobRule] = {
    "policy": KnobRule(
        "Active ordering policy {name, params}; the leader switches with zero downtime.",
        lambda: PluginKnob.model_json_schema(),
        _policy_value,
    ),
    "admission": KnobRule(
        "Admission plug-in and its bounds {name, params} (e.g. capacity: max_concurrency, "
        "kv_usage_max).",
        lambda: _plugin_schema(ADMISSIONS),
        lambda v: _plugin(ADMISSIONS, v),
    ),
    "placement": KnobRule(
        "Placement plug-in {name, params}.",
        lambda: _plugin_schema(PLACEMENTS),
        lambda v: _plugin(PLACEMENTS, v),
    ),
    "fairness": KnobRule(
        FairnessKnob.__doc__ or "", FairnessKnob.model_json_schema, _dumped(FairnessKnob)
    ),
    "slo_defaults": KnobRule(
        SloDefaultsKnob.__doc__ or "", SloDefaultsKnob.model_json_schema, _dumped(SloDefaultsKnob)
    ),
    "queue_cap": KnobRule(
        QueueCapKnob.__doc__ or "", QueueCapKnob.model_json_schema, _dumped(QueueCapKnob)
    ),
}


def validate_knob(name: str, value: Any) -> Any:
    """The value to store for knob `name`; raises ApiError (422) when it is refused."""
    if not KNOB_NAME.fullmatch(name):
        raise ApiError(422, f"knob names match {KNOB_NAME.pattern}", param="name")
    if name in READ_ONLY:
        raise ApiError(422, f"knob {name!r} is not set directly: {READ_ONLY[name]}", param="name")
    rule = RULES.get(name)
    return value if rule is None else rule.validate(value)


def known_knobs() -> dict[str, dict[str, Any]]:
    """Description and JSON schema of every known knob."""
    return {name: {"description": r.description, "schema": r.schema()} for name, r in RULES.items()}


def _auto_params(params: dict[str, Any] | None) -> dict[str, Any]:
    try:
        auto = AutoParams.model_validate(params or {})
    except ValidationError as exc:
        raise FieldErrors(
            [{"loc": e["loc"], "msg": e["msg"]} for e in exc.errors()], prefix="params."
        ) from exc
    unknown = [p for p in [*auto.pool, auto.initial] if p not in registry_names()]
    if unknown:
        msg = f"not registered policies: {', '.join(unknown)}"
        raise FieldErrors([{"loc": ("pool",), "msg": msg}], prefix="params.")
    return auto.model_dump(mode="json")
