"""Parsing of the simulator commands' repeated options (`--policy`, `--param`, `--key`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import yaml

from control_plane.core.cli_errors import OptionError
from control_plane.sim.runner import PluginChoice
from control_plane.sim.setup import PolicySpec

PLUGIN_PREFIXES = ("admission", "placement")


def parse_value(text: str) -> Any:
    """A YAML scalar: `3` → 3, `0.5` → 0.5, `true` → True, `null` → None, else the string."""
    value = yaml.safe_load(text) if text.strip() else ""
    return value if isinstance(value, int | float | bool | str | list) or value is None else text


def parse_params(items: Sequence[str]) -> dict[str, dict[str, Any]]:
    """`["vtc.level=3", "admission.token_fence=0.9"]` → `{"vtc": {"level": 3}, …}`."""
    out: dict[str, dict[str, Any]] = {}
    for item in items:
        key, sep, value = item.partition("=")
        target, dot, name = key.partition(".")
        if not (sep and dot and target and name):
            raise OptionError(f"--param {item!r}: expected POLICY.KEY=VALUE")
        out.setdefault(target, {})[name] = parse_value(value)
    return out


def parse_policies(items: Sequence[str], params: dict[str, dict[str, Any]]) -> list[PolicySpec]:
    """`NAME` or `LABEL=NAME` (two variants of one policy: `vtc3=vtc --param vtc3.level=3`)."""
    specs = []
    for item in items:
        label, sep, name = item.partition("=")
        if not sep:
            label = name = item
        if not label or not name:
            raise OptionError(f"--policy {item!r}: expected NAME or LABEL=NAME")
        specs.append(PolicySpec(label, name, dict(params.get(label, {}))))
    labels = [s.label for s in specs]
    if len(set(labels)) != len(labels):
        raise OptionError("--policy: labels must be unique (use LABEL=NAME for variants)")
    unknown = set(params) - set(labels) - set(PLUGIN_PREFIXES)
    if unknown:
        raise OptionError(
            f"--param for unknown policy label(s): {', '.join(sorted(unknown))} "
            "(give it with --policy, or use admission./placement.)"
        )
    return specs


def plugin_choice(
    admission: str | None, placement: str | None, params: dict[str, dict[str, Any]]
) -> PluginChoice:
    return PluginChoice(
        admission=admission,
        admission_params=params.get("admission"),
        placement=placement,
        placement_params=params.get("placement"),
    )


def parse_pairs(items: Sequence[str], option: str) -> dict[str, str]:
    """`["alice=sk-1", "bob=sk-2"]` → `{"alice": "sk-1", "bob": "sk-2"}`."""
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not (sep and name and value):
            raise OptionError(f"{option} {item!r}: expected NAME=VALUE")
        out[name] = value
    return out


def parse_keys(items: Sequence[str]) -> dict[str, str]:
    """`--key TENANT=API_KEY` options as a mapping."""
    return parse_pairs(items, "--key")
