"""Typed reading of one decoded JSON object: every error names the field it is about."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from control_plane.core.job import Slo

T = TypeVar("T")


class ContractError(ValueError):
    """A message that does not decode into its contract; the text names the field."""


class Fields:
    """Typed access to one object's fields.

    Rule: a missing or null field gives the default (or `error` when required); a present one
    of the wrong type or out of range raises `error` with `"<prefix><name>: <why>"`. Fields
    the reader does not ask for are ignored, so a newer sender may add one.
    """

    def __init__(
        self,
        data: Mapping[str, Any],
        error: type[ContractError] = ContractError,
        prefix: str = "",
    ) -> None:
        self.data = data
        self.error = error
        self.prefix = prefix

    def _get(self, name: str, check: Callable[[Any], T], default: Any, required: bool) -> Any:
        value = self.data.get(name)
        if value is None:
            if required:
                raise self.error(f"{self.prefix}{name}: required")
            return default
        try:
            return check(value)
        except (TypeError, ValueError) as exc:
            raise self.error(f"{self.prefix}{name}: {exc}") from None

    # The first test of each reader is the common case, answered without a call: every
    # `complete` event is read field by field by the leader and the recorder.
    def text(self, name: str, default: str | None = None, *, required: bool = False) -> Any:
        value = self.data.get(name)
        if type(value) is str:
            return value
        return self._get(name, _text, default, required)

    def integer(self, name: str, default: int | None = None, *, required: bool = False) -> Any:
        value = self.data.get(name)
        if type(value) is int:
            return value
        return self._get(name, _integer, default, required)

    def number(self, name: str, default: float | None = None, *, required: bool = False) -> Any:
        value = self.data.get(name)
        if type(value) is float and value - value == 0.0:  # finite: inf - inf and nan are nan
            return value
        return self._get(name, _number, default, required)

    def flag(self, name: str) -> bool:
        return bool(self._get(name, _flag, False, False))

    def inner(self, name: str) -> Fields:
        """The object held by field `name` (an empty one when absent)."""
        raw = self.data.get(name) or {}
        if not isinstance(raw, Mapping):
            raise self.error(f"{self.prefix}{name}: expected an object, got {type(raw).__name__}")
        return Fields(raw, self.error, f"{self.prefix}{name}.")

    def slo(self) -> Slo:
        inner = self.inner("slo")
        return Slo(
            ttft_s=inner.number("ttft_s"),
            tpot_s=inner.number("tpot_s"),
            e2e_s=inner.number("e2e_s"),
        )


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return value


def _integer(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"expected an integer, got {type(value).__name__}")
    if not float(value).is_integer():
        raise ValueError(f"expected an integer, got {value!r}")
    return int(value)


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"expected a number, got {type(value).__name__}")
    if not math.isfinite(value):
        raise ValueError(f"expected a finite number, got {value!r}")
    return float(value)


def _flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"expected true or false, got {type(value).__name__}")
    return value
