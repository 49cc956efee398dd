"""Every module a leader imports inside a function is loaded by `warm_imports` beforehand, so
no import stalls a leader's event loop mid-term (it lost its lease to scipy.stats's)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import control_plane

LEADER_PACKAGES = ("core", "policies", "admission", "placement", "control", "scheduler")
ROOT = Path(control_plane.__file__).parent


def lazy_imports() -> set[str]:
    """Modules imported inside a function anywhere in the packages a leader runs."""
    found: set[str] = set()
    for package in LEADER_PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            for fn in ast.walk(ast.parse(path.read_text())):
                if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                for node in ast.walk(fn):
                    if isinstance(node, ast.Import):
                        found.update(alias.name for alias in node.names)
                    elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                        found.add(node.module)
    return found


def test_the_scan_sees_the_orchestrators_scipy_import() -> None:
    assert "scipy.stats" in lazy_imports()


def test_a_warmed_scheduler_process_has_every_lazy_import_loaded() -> None:
    script = (
        "import asyncio, json, sys\n"
        "import control_plane.scheduler.main\n"
        "from control_plane.scheduler.warm import warm_imports\n"
        "asyncio.run(warm_imports())\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    loaded = set(json.loads(out.stdout))
    assert lazy_imports() - loaded == set()
