"""JSON text of the values stored in JSON columns: exact for every JSON shape.

orjson is fast but refuses integers beyond 64 bits and reads them back as floats; those rare
values go through the standard library instead, so what is written is what is read back.
"""

from __future__ import annotations

import json
from typing import Any

import orjson


def dumps(value: Any) -> str:
    """Compact JSON text of `value` (any JSON shape, unicode kept as is)."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        if not _has_big_int(value):
            raise
        return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def loads(text: str | bytes) -> Any:
    """The value of JSON text written by `dumps` (big integers stay exact integers)."""
    value = orjson.loads(text)
    if _has_big_float(value):
        return json.loads(text)
    return value


def _has_big_int(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return not -(2**63) <= value < 2**64
    if isinstance(value, dict):
        return any(_has_big_int(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_has_big_int(v) for v in value)
    return False


def _has_big_float(value: Any) -> bool:
    """True when orjson may have turned an integer literal beyond 64 bits into a float."""
    if isinstance(value, float):
        return abs(value) >= 2.0**63
    if isinstance(value, dict):
        return any(_has_big_float(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_big_float(v) for v in value)
    return False
