"""Regenerate `docs/results.md`: `python -m control_plane.sim.results_doc [--jobs 2]`.

Runs, in the simulator, `exfairs-I` … `exfairs-VI` under fcfs, rr, vtc and exfairs;
`hmas-stress` and `hmas-drift` under every policy of the meta-controller's pool, vLLM's
default (fcfs, no admission limit) and `auto` with each selector (per phase; the `llm`
selector only with `--llm-url`, a model server it asks over HTTP); and
`hmfs-multimodal` under vtc and hmfs (plus agent-level VTC for contrast). It then writes the
tables and checks the papers' claims against the numbers. Each ExFairS scenario is also run
as a load sweep: at ρ = offered / measured capacity ∈ `SWEEP_RHOS` (the capacity `arbiter sim
capacity` measures for its own mix; the scenario's `load_scale` set to give that ρ), under
the same policies and the `usage: lowers` variant of exfairs. Every number in the file comes
from these runs; the same seeds give the same file.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from control_plane.control.meta import AUTO, DEFAULT_POOL
from control_plane.sim.capacity import pool_loads
from control_plane.sim.results_fair import FAIR_POLICIES, FAIR_SCENARIO, fair_extras
from control_plane.sim.results_hmas import AUTO_LLM, VLLM_DEFAULT
from control_plane.sim.results_kairos import (
    KAIROS_PLUGINS,
    KAIROS_POLICIES,
    KAIROS_RHOS,
    KAIROS_SCENARIOS,
    kairos_section,
    replace_section,
)
from control_plane.sim.results_tables import COVERAGE_MARK, SWEEP_MARK, render_markdown
from control_plane.sim.runner import PluginChoice, run_policy
from control_plane.sim.scenario import Scenario, load_scenario
from control_plane.sim.setup import PolicySpec
from control_plane.sim.workload import build_workload

EXFAIRS = tuple(f"exfairs-{n}" for n in ("I", "II", "III", "IV", "V", "VI"))
EXFAIRS_POLICIES = ("fcfs", "rr", "vtc", "exfairs")
HMAS_POLICIES = (
    *(PolicySpec(p, p) for p in DEFAULT_POOL),
    PolicySpec(VLLM_DEFAULT, "fcfs"),
    PolicySpec("auto", AUTO, {"selector": "rules"}),
    PolicySpec("auto-bandit", AUTO, {"selector": "bandit"}),
    PolicySpec("auto-noguard", AUTO, {"selector": "rules", "guards": False}),
    PolicySpec("auto-noexec", AUTO, {"selector": "rules", "execution": {"enabled": False}}),
    *(
        PolicySpec(f"{p}+exec", AUTO, {"pool": [p], "initial": p, "guards": False})
        for p in ("fcfs", "sjf", "wfq")
    ),
)
HMAS_SCENARIOS = ("hmas-stress", "hmas-drift")
STATERA = "fcfs+statera"
COVERAGE_SCENARIOS = ("exfairs-I", "hmas-stress", "hmas-drift")
"""Run once more with Statera's admission, for the coverage of its conformal length bound."""
PLUGINS = {
    VLLM_DEFAULT: PluginChoice(
        admission="capacity", admission_params={"skip_waiting": False, "kv_usage_max": 1.0}
    ),
    STATERA: PluginChoice(admission="statera", admission_params={}),
}
"""Admission overrides by run label: vLLM's default sends everything to the engine."""
PLUGINS.update(KAIROS_PLUGINS)
HMFS_POLICIES = (
    PolicySpec("vtc", "vtc"),
    PolicySpec("hmfs", "hmfs"),
    PolicySpec("vtc-agent", "vtc", {"level": 3}),
)
SWEEP_RHOS = (0.6, 0.8, 1.0, 1.2)
SWEEP_POLICIES = (
    *(PolicySpec(p, p) for p in EXFAIRS_POLICIES),
    PolicySpec("exfairs-lowers", "exfairs", {"usage": "lowers"}),
)
DOC = Path(__file__).resolve().parents[2] / "docs" / "results.md"
ORACLE = DOC.with_name("results-oracle.json")
"""Headline numbers of the last release with the length oracle, for the comparison."""

Job = tuple[str, tuple[PolicySpec, ...], float | None]
"""(scenario, policies, ρ of a load sweep or None for the scenario as shipped)."""


def llm_spec(url: str, model: str, constrain: str) -> PolicySpec:
    """`auto` with the `llm` selector asking `model` at `url` (`sim/advisor.py`)."""
    llm = {"model": model, "url": url, "constrain": constrain}
    return PolicySpec(AUTO_LLM, AUTO, {"selector": "llm", "llm": llm})


def plan(sweep: bool = True, llm: PolicySpec | None = None) -> list[Job]:
    jobs: list[Job] = [
        (s, tuple(PolicySpec(p, p) for p in EXFAIRS_POLICIES), None) for s in EXFAIRS
    ]
    hmas = HMAS_POLICIES if llm is None else (*HMAS_POLICIES, llm)
    jobs += [(s, hmas, None) for s in HMAS_SCENARIOS]
    jobs.append(("hmfs-multimodal", HMFS_POLICIES, None))
    if sweep:
        jobs += [(s, SWEEP_POLICIES, rho) for s in EXFAIRS for rho in SWEEP_RHOS]
    jobs += [(s, (PolicySpec(STATERA, "fcfs"),), None) for s in COVERAGE_SCENARIOS]
    return jobs + kairos_plan(sweep)


def kairos_plan(sweep: bool = True) -> list[Job]:
    """The Kairos scenarios as shipped and (with `sweep`) at the sweep points above them, then
    `kairos-fair` (fairness composed with Kairos's order) as shipped."""
    jobs: list[Job] = [(s, KAIROS_POLICIES, None) for s in KAIROS_SCENARIOS]
    if sweep:
        jobs += [(s, KAIROS_POLICIES, rho) for s in KAIROS_SCENARIOS for rho in KAIROS_RHOS]
    return [*jobs, (FAIR_SCENARIO, FAIR_POLICIES, None)]


def at_rho(scenario: Scenario, rho: float) -> Scenario:
    """`scenario` with the `load_scale` that offers `rho` times its pool's measured capacity."""
    unit = scenario.with_overrides(load_scale=1.0)
    (load,) = pool_loads(unit)
    return scenario.with_overrides(load_scale=rho / load.rho)


def run_job(job: Job) -> tuple[str, dict[str, Any], float]:
    """One scenario under its policies: (label, {policy label: results}, CPU seconds); a sweep
    point's label is `<scenario>@<rho>`, and its results carry the `load_scale` used."""
    name, policies, rho = job
    scenario = load_scenario(name)
    if rho is not None:
        scenario = at_rho(scenario, rho)
    specs = build_workload(scenario)
    results: dict[str, Any] = {}
    cpu = 0.0
    for policy in policies:
        run = run_policy(scenario, policy, specs, plugins=PLUGINS.get(policy.label))
        results[policy.label] = {**run.results, "load_scale": scenario.load_scale}
        if name == FAIR_SCENARIO:  # the contended window needs the records, not kept
            tenants = [t.name for t in scenario.tenants]
            results[policy.label].update(fair_extras(run.records, tenants, scenario.duration_s))
        cpu += run.cpu_s
    label = name if rho is None else f"{name}{SWEEP_MARK}{rho}"
    if policies == (PolicySpec(STATERA, "fcfs"),):
        label = f"{name}{COVERAGE_MARK}"
    return label, results, cpu


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
    parser.add_argument("--no-sweep", action="store_true", help="skip the ExFairS load sweeps")
    parser.add_argument(
        "--only-kairos", action="store_true", help="regenerate only the Kairos section in --out"
    )
    parser.add_argument("--llm-url", help="OpenAI-compatible root URL: adds `auto-llm` runs")
    parser.add_argument("--llm-model", default="tiny-llama", help="the model it serves")
    parser.add_argument(
        "--llm-constrain", default="json_schema", choices=("json_schema", "vllm_regex", "none")
    )
    args = parser.parse_args(argv)
    llm = llm_spec(args.llm_url, args.llm_model, args.llm_constrain) if args.llm_url else None
    if args.only_kairos:
        section = kairos_section(run_all(kairos_plan(), args.jobs))
        args.out.write_text(replace_section(args.out.read_text(encoding="utf-8"), section))
        print(f"wrote the Kairos section of {args.out}", file=sys.stderr)
        return 0
    results = run_all(plan(sweep=not args.no_sweep, llm=llm), args.jobs)
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
