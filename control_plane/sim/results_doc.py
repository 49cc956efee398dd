"""Regenerate `docs/results.md`: `python -m control_plane.sim.results_doc [--jobs 2]`.

Runs, in the simulator, `exfairs-I` … `exfairs-VI` under fcfs, rr, vtc and exfairs,
`hmas-stress` under fcfs, edf, sjf, two_lane and wfq (per phase) and `hmfs-multimodal` under
vtc and hmfs (plus agent-level VTC for contrast), then writes the tables and checks the papers'
claims against the numbers. Every number in the file comes from these runs; the same seeds
give the same file.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from control_plane.sim.results_tables import render_markdown
from control_plane.sim.runner import run_policy
from control_plane.sim.scenario import load_scenario
from control_plane.sim.setup import PolicySpec
from control_plane.sim.workload import build_workload

EXFAIRS = tuple(f"exfairs-{n}" for n in ("I", "II", "III", "IV", "V", "VI"))
EXFAIRS_POLICIES = ("fcfs", "rr", "vtc", "exfairs")
HMAS_POLICIES = ("fcfs", "edf", "sjf", "two_lane", "wfq")
HMFS_POLICIES = (
    PolicySpec("vtc", "vtc"),
    PolicySpec("hmfs", "hmfs"),
    PolicySpec("vtc-agent", "vtc", {"level": 3}),
)
DOC = Path(__file__).resolve().parents[2] / "docs" / "results.md"
ORACLE = DOC.with_name("results-oracle.json")
"""Headline numbers of the last release with the length oracle, for the comparison."""

Job = tuple[str, tuple[PolicySpec, ...]]


def plan() -> list[Job]:
    jobs: list[Job] = [(s, tuple(PolicySpec(p, p) for p in EXFAIRS_POLICIES)) for s in EXFAIRS]
    jobs.append(("hmas-stress", tuple(PolicySpec(p, p) for p in HMAS_POLICIES)))
    jobs.append(("hmfs-multimodal", HMFS_POLICIES))
    return jobs


def run_job(job: Job) -> tuple[str, dict[str, Any], float]:
    """One scenario under its policies: (name, {label: results}, CPU seconds)."""
    name, policies = job
    scenario = load_scenario(name)
    specs = build_workload(scenario)
    results: dict[str, Any] = {}
    cpu = 0.0
    for policy in policies:
        run = run_policy(scenario, policy, specs)
        results[policy.label] = run.results
        cpu += run.cpu_s
    return name, results, cpu


def run_all(jobs: Sequence[Job], workers: int) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    if workers <= 1:
        done = [run_job(job) for job in jobs]
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            done = list(pool.map(run_job, jobs))
    for name, results, cpu in done:
        print(f"{name}: {len(results)} policies, {cpu:.1f} CPU-s of simulation", file=sys.stderr)
        out[name] = results
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=1, help="parallel processes")
    parser.add_argument("--out", type=Path, default=DOC, help="markdown file to write")
    parser.add_argument("--json-dir", type=Path, help="also write <dir>/<scenario>.json")
    args = parser.parse_args(argv)
    results = run_all(plan(), args.jobs)
    if args.json_dir is not None:
        args.json_dir.mkdir(parents=True, exist_ok=True)
        for name, res in results.items():
            text = json.dumps({"scenario": name, "results": res}, indent=1)
            (args.json_dir / f"{name}.json").write_text(text + "\n", encoding="utf-8")
    oracle = json.loads(ORACLE.read_text(encoding="utf-8")) if ORACLE.exists() else None
    args.out.write_text(render_markdown(results, oracle), encoding="utf-8")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
