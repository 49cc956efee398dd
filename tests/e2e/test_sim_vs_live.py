"""Sim vs live: `noisy-neighbour-short` under VTC, simulated and replayed through a real stack.

The live side is the scenario's cluster as processes (one simulated `llama3-8b-a100` worker
with 16 sequences at 2x speed, scheduler, recorder, gateway) and every request sent with the
OpenAI API at its arrival time; the simulated side runs the same request list through the same
policy objects on a virtual clock, with the scheduler's wall-clock constants stretched to the
replay's speed (`Scenario.as_live`). Each tenant's mean queue time must agree within 20 %, or
within `SLACK_S` for the quiet tenants' sub-second means.

The simulated side is the mean of `ENSEMBLE` runs whose arrivals are each shifted by 0–10 ms
(seeded), not one run. A quiet tenant's mean is chaotic in the exact timing: five live runs on
2026-11-28 put quiet-2 at 0.38–0.41 s against 0.472 s for the single deterministic simulation,
which turned out to sit 2.4 standard deviations above the simulator's own spread under
millisecond nudges (24 runs: 0.416 ± 0.023 s; 5 % engine-step jitter gives 0.421 ± 0.017;
the noisy tenant stays at 78.0–78.2 s). The live stack, with millisecond noise at every hop,
draws one trajectory from that spread; most of the gap was the deterministic run being an
unlucky draw. A residual in the same direction remains (below). The seeds are fixed, so the
simulated side is the same number on every run of this test. The live run remains a single
draw (about ±0.03 s for a quiet tenant), so the
absolute slack stays. Against the ensemble, a live run on an idle box had the quiet tenants
5–13 % below (0.496/0.360/0.372/0.500 s vs 0.536/0.413/0.394/0.532 s) and the noisy one
0.3 % above; a second one put quiet-2 at 0.422 s. Live queue time starts at the gateway's
submit (about 3.7 ms after the client's send and 1.9 ms of door, wall clock, are not in it);
shifting arrivals does not move a mean wait, so that is not the residual, which is not
explained.
"""

from __future__ import annotations

import asyncio
import random
import statistics
from dataclasses import replace
from typing import Any

import pytest

from control_plane.sim.cluster import unit_factors
from control_plane.sim.compare import TenantDiff, compare
from control_plane.sim.live_bench import LiveTarget, replay
from control_plane.sim.live_report import live_document
from control_plane.sim.request_spec import RequestSpec
from control_plane.sim.runner import results_document, run_policy
from control_plane.sim.scenario import Scenario, load_scenario
from control_plane.sim.setup import PolicySpec
from control_plane.sim.workload import build_workload
from tests.support.cluster import Cluster

SPEED = 2.0
TOLERANCE = 0.2
SLACK_S = 0.15
"""Absolute agreement enough for a quiet tenant's sub-second mean: about four standard
deviations of the difference between one live draw and the ensemble's mean (±0.03 s each)."""
ENSEMBLE = 16
JITTER_S = 0.01
"""Each simulated run's arrivals are shifted by up to this much (uniform, seeded by run)."""


@pytest.mark.slow
def test_per_tenant_queue_times_agree(cluster: Cluster) -> None:
    scenario = load_scenario("noisy-neighbour-short")
    (group,) = scenario.cluster
    specs = build_workload(scenario)
    keys = cluster.tenants([t.name for t in scenario.tenants])
    cluster.start_worker(profile=group.profile, speed=SPEED, max_num_seqs=group.max_num_seqs)
    cluster.start_scheduler()
    url = cluster.start_gateway()

    records = asyncio.run(replay(specs, unit_factors(scenario), LiveTarget(url, keys, SPEED)))
    live = live_document(scenario, records, PolicySpec("vtc", "vtc"), SPEED)
    names = [t.name for t in scenario.tenants]
    runs = [compare(_simulated(scenario, specs, seed), live) for seed in range(ENSEMBLE)]
    assert all([d.tenant for d in run] == names for run in runs)  # averaged tenant by tenant
    diffs = [_mean_of(draws) for draws in zip(*runs, strict=True)]
    print(f"\nqueue_mean_s per tenant, sim (mean ± sd of {ENSEMBLE} runs) vs live:")
    for d, draws in zip(diffs, zip(*runs, strict=True), strict=True):
        spread = statistics.stdev(x.a or 0.0 for x in draws)
        print(f"  {d.tenant:8} sim {_s(d.a)} ± {spread:.3f} s  live {_s(d.b)} s  ({d.relative})")
    statuses = {r.status for r in records}
    assert statuses <= {"ok", "rejected"}, statuses  # nothing lost; only the cap's 429s
    bad = [
        d
        for d in diffs
        if d.a is None
        or d.b is None
        or (abs(d.a - d.b) > SLACK_S and (d.relative or 0.0) > TOLERANCE)
    ]
    assert not bad, f"{bad}\n{cluster.logs()}"


def _simulated(scenario: Scenario, specs: list[RequestSpec], seed: int) -> dict[str, Any]:
    """One simulated run's results document, its arrivals shifted by up to `JITTER_S`."""
    rng = random.Random(seed)
    shifted = [replace(s, arrival=s.arrival + rng.uniform(0.0, JITTER_S)) for s in specs]
    shifted.sort(key=lambda s: s.arrival)
    run = run_policy(scenario.as_live(SPEED), PolicySpec("vtc", "vtc"), shifted)
    return results_document(scenario, [run])


def _s(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def _mean_of(draws: tuple[TenantDiff, ...]) -> TenantDiff:
    """One tenant's comparison with the simulated side averaged over the ensemble."""
    values = [d.a for d in draws]
    mean = None if None in values else statistics.fmean(v or 0.0 for v in values)
    return TenantDiff(draws[0].tenant, mean, draws[0].b)
