"""One soak from start to verdict: deployment, capacity, driven phase, report, JSON."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path
from typing import Any

from rich.console import Console

from control_plane.bench.soak import Load, SoakPlan, drive, measure_capacity
from control_plane.bench.soak_report import Sample, sample_line, table, verdict
from control_plane.bench.up_process import UpConfig, UpProcess


async def _soak(up: UpProcess, plan: SoakPlan, say: Console) -> dict[str, Any]:
    load = Load(up, plan)
    try:
        capacity = None
        rate = plan.rate
        if rate is None:
            say.print(f"measuring capacity for {plan.capacity_s:g}s…")
            capacity = await measure_capacity(load, plan)
            rate = plan.load * capacity
        say.print(f"capacity {capacity or '(given)'} req/s; driving {rate:.2f} req/s")
        samples = await drive(up, load, rate, lambda s: say.print(sample_line(s)))
        return {
            "capacity_rps": capacity,
            "rate_rps": rate,
            "samples": samples,
            "outcomes": dict(load.outcomes),
            "failures": load.failures,
            "sent_rps": load.sent / (plan.minutes * 60.0),
        }
    finally:
        await load.close()


def run_soak(
    plan: SoakPlan, config: UpConfig, attach: Path | None, state_dir: Path, out: Path, say: Console
) -> bool:
    """Run the soak, print the per-sample lines and the growth table, write `out`; True = pass."""
    if attach is not None:
        up = UpProcess.attach(attach)
    else:
        say.print(f"starting arbiter up in {state_dir}…")
        up = UpProcess.start(config, state_dir)
    try:
        run = asyncio.run(_soak(up, plan, say))
    finally:
        up.stop()
    samples: list[Sample] = run["samples"]
    v = verdict(samples, plan.warmup_s, run["outcomes"])
    say.print(table(v))
    say.print(
        f"requests: {run['outcomes']} (sent {run['sent_rps']:.2f}/s of {run['rate_rps']:.2f}/s "
        f"planned: {v.held:.1%} of the arrivals, {v.unsent} not sent); request errors: "
        f"{v.failed_requests}; restarted: {v.restarted or 'none'}"
    )
    for failure in run["failures"][:5]:
        say.print(f"  failed: {failure}")
    say.print("[green]PASS[/green]" if v.passed else "[red]FAIL[/red]")
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "plan": dataclasses.asdict(plan),
        "up": dataclasses.asdict(config) if attach is None else {"attached": str(attach)},
        "capacity_rps": run["capacity_rps"],
        "rate_rps": run["rate_rps"],
        "sent_rps": run["sent_rps"],
        "outcomes": run["outcomes"],
        "failures": run["failures"],
        "samples": [s.as_dict() for s in samples],
        "verdict": dataclasses.asdict(v),
    }
    out.write_text(json.dumps(doc, indent=2))
    say.print(f"written to {out}")
    return v.passed
