"""Number and table formatting shared by the `docs/results.md` sections."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Results = Mapping[str, Mapping[str, Any]]
"""One scenario's results: run label → the run's metrics."""


def fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.{digits}g}" if abs(value) < 1e5 else f"{value:,.0f}"
    return str(value)


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)
