"""Run a scenario under one or more policies and assemble the `results.json` document.

Each policy gets a fresh scheduler, ledger and cluster over the *same* request list (drawn
once from the scenario seed), so differences between policies come from their decisions only.
Nothing time- or machine-dependent enters the document: the same seed gives the same bytes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from control_plane.core.lengths import LengthPredictor
from control_plane.sim.advisor import SimAdvisor
from control_plane.sim.engine_loop import Progress, Simulator
from control_plane.sim.metrics import RunInfo, policy_results
from control_plane.sim.records import RequestRecord
from control_plane.sim.scenario import Scenario
from control_plane.sim.setup import PolicySpec, build_setup
from control_plane.sim.workload import RequestSpec, build_workload

SCHEMA = "arbiter.results/1"


@dataclass
class PluginChoice:
    """Admission/placement names and params overriding the scenario's (None = scenario's)."""

    admission: str | None = None
    admission_params: dict[str, Any] | None = None
    placement: str | None = None
    placement_params: dict[str, Any] | None = None


@dataclass
class PolicyRun:
    policy: PolicySpec
    records: list[RequestRecord]
    info: RunInfo
    cpu_s: float
    results: dict[str, Any]


def run_info(scenario: Scenario, end_s: float) -> RunInfo:
    """The record-independent part of the metrics input (no simulator measurements)."""
    weights = {t.name: t.weight for t in scenario.tenants}
    return RunInfo(
        duration_s=scenario.duration_s,
        end_s=end_s,
        tenants=[t.name for t in scenario.tenants],
        weights=weights,
        phases=[(p.name, p.start_s, p.end_s) for p in scenario.phases],
        window_s=scenario.scheduler.ledger_window_s,
    )


def run_policy(
    scenario: Scenario,
    policy: PolicySpec,
    specs: list[RequestSpec] | None = None,
    *,
    plugins: PluginChoice | None = None,
    speed: float = 1.0,
    gap_sample_s: float = 0.1,
    progress: Progress | None = None,
    instrument: Callable[[Simulator], None] | None = None,
) -> PolicyRun:
    """Simulate `scenario` under `policy`; `specs` defaults to the scenario's workload.
    `instrument` sees the simulator before it runs (`arbiter sim speed --split` times it)."""
    plugins = plugins or PluginChoice()
    setup = build_setup(
        scenario,
        policy,
        admission=plugins.admission,
        admission_params=plugins.admission_params,
        placement=plugins.placement,
        placement_params=plugins.placement_params,
        speed=speed,
        gap_sample_s=gap_sample_s,
    )
    start = time.process_time()
    advisor = SimAdvisor()
    workload = specs if specs is not None else build_workload(scenario)
    sim = Simulator(setup, workload, progress, advisor=advisor)
    if instrument is not None:
        instrument(sim)
    try:
        records = sim.run()
    finally:
        advisor.close()
    cpu_s = time.process_time() - start
    info = run_info(scenario, max(sim.now, scenario.duration_s))
    info.max_service_gap = sim.backlog.tracker.worst
    info.gap_pair = sim.backlog.tracker.worst_pair
    info.workers = {
        w.id: {"busy_s": sim.busy_s[w.index], "preemptions": float(w.engine.num_preemptions)}
        for w in setup.workers
    }
    results = policy_results(records, info)
    results = {
        "policy": policy.name,
        "params": dict(policy.params),
        "admission": setup.dispatcher.admission.snapshot(),
        "placement": setup.dispatcher.placement.snapshot(),
        "length_prediction": length_prediction(setup.dispatcher.lengths, records),
        "switches": [s.to_json() for s in setup.controller.switches] if setup.controller else [],
        "selector": setup.controller.selector.snapshot() if setup.controller else None,
        **results,
    }
    return PolicyRun(policy, records, info, cpu_s, results)


def length_prediction(lengths: LengthPredictor, records: Sequence[RequestRecord]) -> dict[str, Any]:
    """How well the scheduler predicted output lengths: its error over served answers, and
    the mean served length and cap for scale."""
    served = [r for r in records if r.status == "ok"]
    return {
        **lengths.error.to_json(),
        "mean_out": sum(r.n_out for r in served) / len(served) if served else None,
        "mean_cap": sum(r.max_tokens for r in served) / len(served) if served else None,
    }


def scenario_header(scenario: Scenario, source: str) -> dict[str, Any]:
    return {
        "name": scenario.name,
        "description": scenario.description,
        "seed": scenario.seed,
        "duration_s": scenario.duration_s,
        "load_scale": scenario.load_scale,
        "tenants": [t.name for t in scenario.tenants],
        "phases": [p.model_dump() for p in scenario.phases],
        "scheduler": scenario.scheduler.model_dump(),
        "source": source,
    }


def results_document(scenario: Scenario, runs: Sequence[PolicyRun]) -> dict[str, Any]:
    """`{"schema", "scenario", "results": {label: {...}}}` for a set of policy runs."""
    return {
        "schema": SCHEMA,
        "scenario": scenario_header(scenario, "sim"),
        "results": {run.policy.label: run.results for run in runs},
    }


def run_scenario(
    scenario: Scenario,
    policies: Sequence[PolicySpec],
    *,
    plugins: PluginChoice | None = None,
    speed: float = 1.0,
    progress: Callable[[PolicySpec], Progress | None] | None = None,
) -> tuple[dict[str, Any], list[PolicyRun]]:
    """Every policy over the same workload; the results document and the runs."""
    specs = build_workload(scenario)
    runs = [
        run_policy(
            scenario,
            p,
            specs,
            plugins=plugins,
            speed=speed,
            progress=progress(p) if progress else None,
        )
        for p in policies
    ]
    return results_document(scenario, runs), runs
