"""`unwritable`, `is_file`, `is_folder` for a user who may not look into a folder on the way:
before, `Path.exists()` raised PermissionError and the command ended with a traceback (root,
whom permission bits never stop, could not see it). Run as `nobody` through `setpriv`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from control_plane.core.cli_errors import is_file, is_folder, unwritable

REPO = Path(__file__).resolve().parents[3]
SHOW = (
    "import sys; from pathlib import Path; "
    "from control_plane.core.cli_errors import is_file, is_folder, unwritable; "
    "p = Path(sys.argv[1]); print(is_file(p), is_folder(p), unwritable(p))"
)


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="needs root and setpriv to run as another user",
)
def test_a_folder_this_user_cannot_look_into_is_named() -> None:
    base = Path(os.environ.get("TMPDIR", "/tmp"))  # pytest's tmp_path is closed to others
    shared = base / f"arb-locked-{os.getpid()}"
    locked = shared / "locked"
    locked.mkdir(parents=True, mode=0o700)
    shared.chmod(0o755)
    try:
        done = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
             sys.executable, "-c", SHOW, str(locked / "x" / "out")],
            capture_output=True, text=True, cwd=REPO, timeout=60,
            env={**os.environ, "PYTHONPATH": str(REPO), "HOME": str(base)},
        )  # fmt: skip
    finally:
        shutil.rmtree(shared)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        f"False False {locked} is not open to this user (Permission denied)"
    )


def test_what_can_be_seen_is_answered_as_before(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("")
    assert is_file(tmp_path / "f") and not is_folder(tmp_path / "f")
    assert is_folder(tmp_path) and not is_file(tmp_path / "none")
    assert unwritable(tmp_path / "new" / "deeper") is None
    assert unwritable(tmp_path / "f" / "x") == f"{tmp_path / 'f'} is a file, not a directory"
