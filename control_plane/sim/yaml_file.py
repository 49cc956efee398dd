"""Reading a scenario's YAML the way its author meant it, and saying in one line what is wrong.

Rule: only `true`/`false` are booleans (YAML 1.2's core schema), and a mapping names each key
once. PyYAML follows YAML 1.1,
where `on`, `off`, `yes`, `no`, `y` and `n` are booleans too, so `first: off` would arrive as
`False` and a refusal would quote a value the author never wrote.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

_BOOL = "tag:yaml.org,2002:bool"
_MERGE = "tag:yaml.org,2002:merge"


class ScenarioError(ValueError):
    """A scenario file that cannot be used; each line of the message names the file and a field."""


class _Yaml12Loader(yaml.SafeLoader):
    """`yaml.SafeLoader` with YAML 1.2's booleans, refusing a key given twice in one mapping
    (PyYAML keeps the last silently: a second `chat:` class would replace the first)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == _MERGE:  # `<<: *anchor`: merged keys may be overridden
                continue
            key = self.construct_object(key_node, deep=deep)  #
            if not isinstance(key, str | int | float | bool):
                continue  # an unhashable key: the base class says what is wrong with it
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


_Yaml12Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != _BOOL]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Yaml12Loader.add_implicit_resolver(
    _BOOL, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


def read_yaml(path: Path) -> Any:
    """The document in `path`; `ScenarioError` (with line and column) when it is not YAML."""
    try:
        return yaml.load(path.read_text(encoding="utf-8"), Loader=_Yaml12Loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ScenarioError(f"{path}: not valid YAML{where}: {problem}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(f"{path}: cannot be read: {exc}") from None


def describe(path: Path, exc: ValidationError, limit: int = 5) -> str:
    """One line per validation error, `<file>: <field.path>: <why> (got <value>)`; at most
    `limit` lines, then how many more there are."""
    errors = exc.errors()
    lines = [f"{path}: {_line(error)}" for error in errors[:limit]]
    if len(errors) > limit:
        lines.append(f"{path}: … and {len(errors) - limit} more")
    return "\n".join(lines)


def _line(error: Any) -> str:
    field = ".".join(str(part) for part in error["loc"]) or "(document)"
    got = error.get("input")
    shown = "" if isinstance(got, dict | list) else f" (got {got!r})"
    return f"{field}: {error['msg']}{shown}"
