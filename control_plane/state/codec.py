"""JSON encoding of values stored in Redis, and parsing of stream replies."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import orjson

StreamEntry = tuple[str, dict[str, str]]


def dumps(value: Any) -> str:
    """Compact JSON text (orjson: str keys, datetimes, dataclasses, numpy scalars)."""
    return orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY).decode()


def loads(text: str | bytes) -> Any:
    """Parse JSON text written by `dumps` (or by a Lua script)."""
    return orjson.loads(text)


def text(value: str | bytes) -> str:
    """A reply value as str (the client decodes responses; typing does not know it)."""
    return value.decode() if isinstance(value, bytes) else value


def str_map(raw: Mapping[Any, Any]) -> dict[str, str]:
    """A hash reply as str → str."""
    return {text(name): text(value) for name, value in raw.items()}


def time_arg(now: float) -> str:
    """A timestamp as a script argument: a JSON number with full float precision."""
    if not math.isfinite(now):
        raise ValueError(f"time must be finite, got {now!r}")
    return repr(float(now))


def stream_entries(reply: Any) -> list[StreamEntry]:
    """Entries of an XREAD/XREADGROUP reply (RESP2 shape: [[stream, [(id, fields)]]])."""
    out: list[StreamEntry] = []
    for _stream, entries in reply or []:
        for entry_id, fields in entries:
            # A pending entry that was trimmed away comes back with no fields: skip it.
            if fields is not None:
                out.append((str(entry_id), fields))
    return out
