"""Form fields from the JSON schemas the admin API publishes for policy and plug-in params
(pure: which widget, bounds, default, and how to turn the widget's value back into JSON)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import pandas as pd

Kind = Literal["integer", "number", "boolean", "enum", "text", "json"]


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """One params field: its widget kind, bounds and default; `nullable` allows "unset"."""

    name: str
    kind: Kind
    default: Any = None
    minimum: float | None = None
    maximum: float | None = None
    options: tuple[Any, ...] = ()
    nullable: bool = False
    help: str | None = None


def _base(prop: Mapping[str, Any]) -> tuple[Mapping[str, Any], bool]:
    variants = prop.get("anyOf") or prop.get("oneOf")
    if not variants:
        return prop, False
    concrete = [v for v in variants if v.get("type") != "null"]
    nullable = len(concrete) < len(variants)
    return (concrete[0] if len(concrete) == 1 else {"type": "json"}), nullable


def _kind(base: Mapping[str, Any]) -> Kind:
    if "enum" in base or "const" in base:
        return "enum"
    kinds: dict[Any, Kind] = {"integer": "integer", "number": "number", "boolean": "boolean"}
    kind = base.get("type")
    return kinds.get(kind, "text" if kind == "string" else "json")


def _bound(base: Mapping[str, Any], inclusive: str, exclusive: str) -> float | None:
    value = base.get(inclusive, base.get(exclusive))
    return None if value is None else float(value)


def field_specs(schema: Mapping[str, Any]) -> list[FieldSpec]:
    """Every property of an object schema as a FieldSpec, in schema order."""
    specs = []
    for name, prop in (schema.get("properties") or {}).items():
        base, nullable = _base(prop)
        kind = _kind(base)
        options = tuple(base.get("enum") or ([base["const"]] if "const" in base else []))
        specs.append(
            FieldSpec(
                name=name,
                kind=kind,
                default=prop.get("default"),
                minimum=_bound(base, "minimum", "exclusiveMinimum"),
                maximum=_bound(base, "maximum", "exclusiveMaximum"),
                options=options,
                nullable=nullable,
                help=prop.get("description"),
            )
        )
    return specs


def to_json_value(spec: FieldSpec, raw: Any) -> Any:
    """The JSON value of a widget's raw value (text fields of kind json are parsed)."""
    if raw is None or (spec.nullable and raw == ""):
        return None
    if spec.kind == "json":
        return json.loads(raw) if isinstance(raw, str) else raw
    if spec.kind == "integer":
        return int(raw)
    if spec.kind == "number":
        return float(raw)
    return raw


def flat(value: Any, prefix: str = "") -> dict[str, Any]:
    """A JSON value as dotted field → leaf value ({"params": {"x": 1}} → {"params.x": 1})."""
    if isinstance(value, Mapping) and value:
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(flat(item, f"{prefix}{key}."))
        return out
    return {prefix.rstrip(".") or "value": value}


def shown(value: Any) -> str:
    """One leaf value for people: floats without noise, None as "—", lists comma-joined."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list | tuple):
        return ", ".join(shown(v) for v in value) or "—"
    if isinstance(value, Mapping):
        return "{}"
    return str(value)


def readable(value: Any) -> str:
    """A JSON value as 'field: value' pairs ("weight: 3"; "name: fcfs; params.x: 1")."""
    if value is None:
        return "—"
    if not isinstance(value, Mapping):
        return shown(value)
    return "; ".join(f"{k}: {shown(v)}" for k, v in flat(value).items())


def diff_rows(old: Any, new: Any) -> list[dict[str, str]]:
    """The fields a change alters, as rows {field, current, new} (unchanged fields left out)."""
    before, after = flat(old), flat(new)
    fields = [*before, *(k for k in after if k not in before)]
    return [
        {"field": k, "current": shown(before.get(k)), "new": shown(after.get(k))}
        for k in fields
        if before.get(k) != after.get(k)
    ]


def audit_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The audit log as a table (times in UTC, old/new as 'field: value' pairs)."""
    columns = ["at", "actor", "action", "target", "old", "new", "reason"]
    records = [
        {
            "at": pd.to_datetime(r["at"], unit="s", utc=True),
            "actor": r["actor"],
            "action": r["action"],
            "target": r["target"],
            "old": readable(r["old"]),
            "new": readable(r["new"]),
            "reason": r["reason"],
        }
        for r in rows
    ]
    return pd.DataFrame(records, columns=columns)


def node_keys(hierarchy: list[dict[str, Any]]) -> dict[str, float]:
    """Every node of the hierarchy ('tenant', 'tenant/app', 'tenant/app/agent') → weight."""
    out: dict[str, float] = {}
    for tn in hierarchy:
        tenant = tn["tenant"]["name"]
        out[tenant] = tn["tenant"]["weight"]
        for an in tn["apps"]:
            app = f"{tenant}/{an['app']['name']}"
            out[app] = an["app"]["weight"]
            for agent in an["agents"]:
                out[f"{app}/{agent['name']}"] = agent["weight"]
    return out
