"""Operator knobs as they cross processes: typed values for the knobs the control plane reads.

Wire format: unchanged from the previous release. The knobs hash maps a name to one JSON
value; a change is announced as `{"name", "value", "version"}`. Knobs this release does not
interpret (an operator's own plug-in may read them) stay `Other` and keep their JSON as is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, TypeAlias, TypeVar

from control_plane.contracts.fields import ContractError, Fields

JsonValue: TypeAlias = bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"] | None
K = TypeVar("K")


PLUGIN_NAME_MAX: Final = 200
"""Longest plug-in name (a registered name, or `module:Class`) a new setting may give: the admin
API and `ARBITER_POLICY`; a request row's `policy` column holds as many characters (migration
0008). Read back, a stored knob's longer name (an older build took any) still names the
plug-in that runs; a row cuts its label to this length rather than be refused."""


class KnobError(ContractError):
    """A stored knob value that does not decode; the message names the knob and field."""


@dataclass(frozen=True, slots=True)
class PluginChoice:
    """`policy`, `admission` or `placement`: which plug-in, with its own params (validated by
    the plug-in's params model when it is built)."""

    name: str
    params: Mapping[str, JsonValue] = field(default_factory=dict)

    def to_json(self) -> JsonValue:
        return {"name": self.name, "params": dict(self.params)}


@dataclass(frozen=True, slots=True)
class NodeWeights:
    """`weights`: node path → weight, overriding the tenant directory (`"acme/chat"`)."""

    table: Mapping[tuple[str, ...], float] = field(default_factory=dict)

    def to_json(self) -> JsonValue:
        return {"/".join(node): weight for node, weight in self.table.items()}


@dataclass(frozen=True, slots=True)
class QueueCap:
    """`queue_cap`: the queue cap of tenants whose record sets none."""

    default: int | None = None

    def to_json(self) -> JsonValue:
        return {"default": self.default}


@dataclass(frozen=True, slots=True)
class SloTargets:
    """`slo_defaults`: cluster-wide SLO targets in milliseconds (None: not set)."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None

    def to_json(self) -> JsonValue:
        return {"ttft_ms": self.ttft_ms, "tpot_ms": self.tpot_ms, "e2e_ms": self.e2e_ms}


@dataclass(frozen=True, slots=True)
class Fairness:
    """`fairness`: SAFI's α and the credit-exchange threshold β."""

    alpha: float | None = None
    beta: float | None = None

    def to_json(self) -> JsonValue:
        return {k: v for k, v in (("alpha", self.alpha), ("beta", self.beta)) if v is not None}


@dataclass(frozen=True, slots=True)
class Other:
    """A knob this release does not interpret (`directory`'s stamp, an operator's own)."""

    value: JsonValue

    def to_json(self) -> JsonValue:
        return self.value


KnobValue: TypeAlias = PluginChoice | NodeWeights | QueueCap | SloTargets | Fairness | Other


@dataclass(frozen=True, slots=True)
class KnobChange:
    """One announced change: the knob's new value and the knobs' version after it."""

    name: str
    value: KnobValue
    version: int = 0


def decode_knob(name: str, value: object) -> KnobValue:
    """The typed value of knob `name`; raises `KnobError` naming the knob and the field."""
    reader = _READERS.get(name)
    if reader is None:
        return Other(value)  # type: ignore[arg-type]  # JSON from the store
    if not isinstance(value, Mapping):
        raise KnobError(f"{name}: expected an object, got {type(value).__name__}")
    typed: KnobValue = reader(Fields(value, KnobError, f"{name}."))
    return typed


def knob_of(knobs: Mapping[str, KnobValue], name: str, kind: type[K]) -> K | None:
    """Knob `name` when it holds a `kind` (unset, or not decodable: None)."""
    value = knobs.get(name)
    return value if isinstance(value, kind) else None


def decode_change(data: object) -> KnobChange:
    """The change a knobs announcement carries; raises `KnobError` naming the field."""
    if not isinstance(data, Mapping):
        raise KnobError(f"change: expected an object, got {type(data).__name__}")
    f = Fields(data, KnobError)
    name = f.text("name", required=True)
    return KnobChange(name, decode_knob(name, data.get("value")), f.integer("version", 0))


def _plugin(f: Fields) -> PluginChoice:
    params = f.data.get("params") or {}
    if not isinstance(params, Mapping):
        raise KnobError(f"{f.prefix}params: expected an object, got {type(params).__name__}")
    name: str = f.text("name", required=True)
    if not name:
        raise KnobError(f"{f.prefix}name: empty (a plug-in's registered name or module:Class)")
    return PluginChoice(name, dict(params))


def _weights(f: Fields) -> NodeWeights:
    table = {tuple(str(k).split("/")): f.number(str(k), required=True) for k in f.data}
    return NodeWeights(table)


def _queue_cap(f: Fields) -> QueueCap:
    return QueueCap(f.integer("default") or None)


def _slo(f: Fields) -> SloTargets:
    return SloTargets(f.number("ttft_ms"), f.number("tpot_ms"), f.number("e2e_ms"))


def _fairness(f: Fields) -> Fairness:
    return Fairness(f.number("alpha"), f.number("beta"))


_READERS: Final[dict[str, Callable[[Fields], Any]]] = {
    "policy": _plugin,
    "admission": _plugin,
    "placement": _plugin,
    "weights": _weights,
    "queue_cap": _queue_cap,
    "slo_defaults": _slo,
    "fairness": _fairness,
}
