"""Checking that a deployment file runs real `arbiter` commands with real flags."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def assert_arbiter_command(argv: list[str]) -> None:
    """`arbiter <argv>` names an existing command (`worker sim` counts two words), and every
    `--flag` in it is one that command's help lists."""
    words = [w for w in argv if not w.startswith("-")][:2]
    path = words[:2] if words[0] == "worker" else words[:1]
    result = subprocess.run(
        [sys.executable, "-m", "control_plane", *path, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert result.returncode == 0, (argv, result.stderr)
    for flag in (w for w in argv if w.startswith("--")):
        assert flag in result.stdout, (argv, flag)
