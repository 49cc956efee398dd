"""The one name → class registry with validated params, for every kind of plug-in.

Policies, admission and placement each keep one `PluginRegistry`: built-in names map to
"module:Class" (imported lazily, so listing costs nothing), and any `module:Class` path names
an operator's own plug-in of the registry's base class.
"""

from __future__ import annotations

import importlib
from typing import Any, Generic, TypeVar, cast

from pydantic import BaseModel, ValidationError

T = TypeVar("T")


class UnknownPluginError(ValueError):
    """The name is neither registered nor an importable `module:Class` of the right kind."""


class PluginParamsError(ValueError):
    """Params failed validation; `errors` holds pydantic's per-field errors."""

    def __init__(self, plugin: str, errors: list[dict[str, Any]]) -> None:
        self.plugin = plugin
        self.errors = errors
        fields = ", ".join(".".join(str(p) for p in e["loc"]) + ": " + e["msg"] for e in errors)
        super().__init__(f"invalid params for {plugin!r}: {fields}")


class PluginRegistry(Generic[T]):
    """Resolves names of one kind of plug-in (`base` subclasses with a `Params` model).

    `unknown` and `invalid` are the error classes raised (subclasses of `UnknownPluginError`
    and `PluginParamsError`, so callers may catch one kind or every kind).
    """

    def __init__(
        self,
        kind: str,
        base: type[Any],
        unknown: type[UnknownPluginError] = UnknownPluginError,
        invalid: type[PluginParamsError] = PluginParamsError,
    ) -> None:
        self.kind = kind
        self.base = base
        self.builtin: dict[str, str] = {}
        self._unknown = unknown
        self._invalid = invalid

    def register(self, name: str, target: str) -> None:
        self.builtin[name] = target

    def names(self) -> list[str]:
        return sorted(self.builtin)

    def resolve(self, name: str) -> type[T]:
        target = self.builtin.get(name, name if ":" in name else None)
        if target is None:
            known = ", ".join(self.names())
            raise self._unknown(f"unknown {self.kind} {name!r}; registered: {known}")
        module_name, _, attr = target.partition(":")
        try:
            cls = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise self._unknown(f"cannot import {self.kind} {target!r}: {exc}") from exc
        if not (isinstance(cls, type) and issubclass(cls, self.base)):
            raise self._unknown(f"{target!r} is not a {self.base.__name__} subclass")
        return cast(type[T], cls)

    def params(self, name: str, cls: type[Any], params: dict[str, Any] | None) -> BaseModel:
        """Validate `params` against `cls.Params` (unknown keys rejected)."""
        model: type[BaseModel] = cls.Params
        try:
            return model.model_validate(params or {})
        except ValidationError as exc:
            raise self._invalid(name, [dict(e) for e in exc.errors()]) from exc
