"""Records as JSON: what the admin API answers and the CLI prints are the same values."""

from __future__ import annotations

import dataclasses
from typing import Any


def as_json(value: Any) -> Any:
    """Records (frozen dataclasses) and containers of them as plain JSON values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: as_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, list | tuple):
        return [as_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): as_json(v) for k, v in value.items()}
    return value
