"""The state directory of `arbiter up` and its `up.json`: readable by the operator only.

`up.json` holds the admin token and the demo tenants' keys, so it is never group- or
world-readable, not even for a moment: each write goes to a new file created with mode 0600,
which then replaces the old one atomically (readers never see half a file).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600


def private_dir(path: Path) -> None:
    """Create `path` (mode 0700); tighten it to 0700 when it exists with wider permissions."""
    path.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
    if stat.S_IMODE(path.stat().st_mode) & 0o077:
        path.chmod(PRIVATE_DIR)


def write_private_json(path: Path, data: dict[str, Any]) -> None:
    """Write `data` to `path` with mode 0600 from creation on, replacing any previous file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE)
    try:
        with os.fdopen(fd, "w") as out:
            json.dump(data, out, indent=2)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def read_json(path: Path) -> dict[str, Any]:
    """The JSON object in `path`, or {} when it is missing or not an object."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
