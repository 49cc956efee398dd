"""Size-capped logs for `arbiter up`'s children, rotated by copy and truncate.

A child writes its log through a descriptor opened for appending and cannot be asked to reopen
it, so the file stays where it is: its bytes are copied to `<log>.1` (`.1` → `.2` …, the
oldest beyond `keep` dropped) and the file is truncated; the child's next append lands at its
start. What the child writes between the copy and the truncation is lost (at most a few
milliseconds of output, once per `max_bytes`): the trade every copy-truncate rotation makes.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

MIB = 1 << 20


@dataclass(frozen=True, slots=True)
class LogLimit:
    """Rule: a log over `max_bytes` is rotated; `keep` earlier files are kept beside it.
    Guarantee: the logs of one child take at most about (`keep` + 1) × `max_bytes`."""

    max_bytes: int = 64 * MIB
    keep: int = 3

    def __post_init__(self) -> None:
        if self.max_bytes <= 0 or self.keep < 1:
            raise ValueError("a log limit needs max_bytes > 0 and keep ≥ 1")


def rotate_if_over(path: Path, limit: LogLimit) -> bool:
    """Rotate `path` when it is over `limit.max_bytes`; → whether it did (a missing file is
    not rotated)."""
    try:
        if path.stat().st_size <= limit.max_bytes:
            return False
    except FileNotFoundError:
        return False
    for older in range(limit.keep - 1, 0, -1):
        src = _numbered(path, older)
        if src.exists():
            src.replace(_numbered(path, older + 1))
    with path.open("rb") as src_file, _numbered(path, 1).open("wb") as dst:
        shutil.copyfileobj(src_file, dst, 1 * MIB)
    with path.open("r+b") as live:
        live.truncate(0)
    return True


def _numbered(path: Path, n: int) -> Path:
    return path.with_name(f"{path.name}.{n}")
