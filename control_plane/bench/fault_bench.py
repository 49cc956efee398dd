"""`arbiter bench faults`: each fault against its own fresh `arbiter up`, then one table.

A separate deployment per fault keeps the runs honest (no fault inherits another's damage);
each keeps its state directory (logs, SQLite, `up.json`) under the output directory.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.table import Table

from control_plane.bench.fault_run import FaultResult, Scenario, run_fault
from control_plane.bench.faults import FAULTS
from control_plane.bench.up_process import UpConfig, UpFailed, UpProcess


def run_one(name: str, sc: Scenario, config: UpConfig, state_dir: Path) -> FaultResult:
    """Start a deployment, run the scenario with fault `name`, stop the deployment."""
    try:
        up = UpProcess.start(config, state_dir)
    except UpFailed as exc:
        return FaultResult(name, problem=str(exc)[-500:])
    try:
        result = asyncio.run(run_fault(up, FAULTS[name], sc))
        if not up.alive():
            result.problem = (result.problem + "; arbiter up exited").lstrip("; ")
        return result
    finally:
        up.stop()


def run_all(
    names: list[str],
    sc: Scenario,
    config: UpConfig,
    out_dir: Path,
    on_result: Callable[[FaultResult], None] | None = None,
) -> list[FaultResult]:
    results = []
    for name in names:
        result = run_one(name, sc, config, out_dir / name)
        results.append(result)
        if on_result is not None:
            on_result(result)
    return results


def passed(r: FaultResult) -> bool:
    """The issue's bar: nothing hung or silently cut, nothing lost or doubled, service back."""
    return (
        not r.problem
        and r.hung == 0
        and r.incomplete == 0
        and r.lost == 0
        and r.duplicated == 0
        and r.recovered
    )


def table(results: list[FaultResult]) -> Table:
    t = Table(title="Faults injected mid-run into `arbiter up` (streamed chat, real openai client)")
    for col in ("fault", "sent", "ok", "explicit errors", "hung", "lost", "dup", "recovered"):
        t.add_column(col, justify="left" if col in ("fault", "explicit errors") else "right")
    t.add_column("recovery", justify="right")
    t.add_column("verdict")
    for r in results:
        errors = ", ".join(f"{k} {v}" for k, v in r.errors.items()) or "-"
        t.add_row(
            r.fault,
            str(r.sent),
            str(r.ok),
            errors,
            str(r.hung + r.incomplete),
            str(r.lost),
            str(r.duplicated),
            "yes" if r.recovered else "NO",
            "-" if r.recovery_s is None else f"{r.recovery_s:.1f} s",
            "pass" if passed(r) else f"FAIL {r.problem}".strip(),
        )
    return t


def write(results: list[FaultResult], path: Path, settings: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "settings": settings,
        "results": [{**r.as_dict(), "passed": passed(r)} for r in results],
    }
    path.write_text(json.dumps(doc, indent=2))
