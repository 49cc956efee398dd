"""Replay of a CSV request trace: timestamps and lengths (and optionally who sent them).

Columns (header row required, any order, extra columns ignored):
`timestamp` (seconds, or any unit with `time_scale`), `prompt_tokens`, `output_tokens`, and
optionally `tenant`, `app`, `agent`, `class` and `max_tokens` (the client's cap, when the trace
recorded it; else the class's or the default, see `sim.workload`). Timestamps are shifted so
that the first row arrives at `start_s` (unless `relative: false`), multiplied by
`time_scale`, and rows at or after the horizon are dropped. Missing hierarchy columns fall
back to the stream's own.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from control_plane.sim.yaml_file import ScenarioError

REQUIRED = ("timestamp", "prompt_tokens", "output_tokens")


@dataclass(frozen=True, slots=True)
class TraceRow:
    time: float
    n_in: int
    n_out: int
    tenant: str | None
    app: str | None
    agent: str | None
    cls: str | None
    max_tokens: int | None = None


class Trace(BaseModel):
    """`process: trace` — requests replayed from a CSV file (path relative to the scenario)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    process: Literal["trace"] = "trace"
    path: str
    time_scale: float = Field(1.0, gt=0)
    relative: bool = True
    start_s: float = Field(0.0, ge=0)

    def rows(self, base_dir: Path, horizon: float) -> list[TraceRow]:
        path = Path(self.path)
        if not path.is_absolute():
            path = base_dir / path
        return read_trace(path, horizon, self.time_scale, self.relative, self.start_s)


def _opt(row: dict[str, str], key: str) -> str | None:
    value = (row.get(key) or "").strip()
    return value or None


class TraceError(ScenarioError):
    """A trace file that cannot be replayed (unreadable, malformed, naming what the scenario
    does not have); the message names the file and the line."""


def read_trace(
    path: Path, horizon: float, time_scale: float = 1.0, relative: bool = True, start_s: float = 0.0
) -> list[TraceRow]:
    """The rows of a trace file, sorted by time; raises `TraceError` on a malformed file."""
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            raw = _read_rows(path, csv.DictReader(fh))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise TraceError(f"trace {path}: cannot be read: {exc}") from None
    raw.sort(key=lambda r: r[0])
    origin = raw[0][0] if raw and relative else 0.0
    out = []
    for t, n_in, n_out, row in raw:
        time = start_s + (t - origin) * time_scale
        if time >= horizon:
            break
        out.append(
            TraceRow(
                time,
                n_in,
                n_out,
                _opt(row, "tenant"),
                _opt(row, "app"),
                _opt(row, "agent"),
                _opt(row, "class"),
                _cap(row, path, 0),
            )
        )
    return out


def _read_rows(
    path: Path, reader: csv.DictReader[str]
) -> list[tuple[float, int, int, dict[str, str]]]:
    missing = [c for c in REQUIRED if c not in (reader.fieldnames or [])]
    if missing:
        raise TraceError(f"trace {path}: missing column(s) {', '.join(missing)}")
    raw = []
    for line, row in enumerate(reader, start=2):
        try:
            t, n_in, n_out = (
                float(row["timestamp"]),
                int(row["prompt_tokens"]),
                int(row["output_tokens"]),
            )
        except (ValueError, TypeError) as exc:
            raise TraceError(f"trace {path}, line {line}: {exc}") from None
        if not math.isfinite(t):
            raise TraceError(f"trace {path}, line {line}: timestamp must be finite, got {t}")
        if n_in < 1 or n_out < 1:
            raise TraceError(f"trace {path}, line {line}: token counts must be >= 1")
        raw.append((t, n_in, n_out, row))
        _cap(row, path, line)
    return raw


def _cap(row: dict[str, str], path: Path, line: int) -> int | None:
    value = _opt(row, "max_tokens")
    if value is None:
        return None
    try:
        cap = int(value)
    except ValueError:
        cap = 0
    if cap < 1:
        raise TraceError(f"trace {path}, line {line}: max_tokens must be an integer >= 1")
    return cap
