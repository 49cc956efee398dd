"""Sim vs live: `noisy-neighbour-short` under VTC, simulated and replayed through a real stack.

The live side is the scenario's cluster as processes (one simulated `llama3-8b-a100` worker
with 16 sequences at 2x speed, scheduler, recorder, gateway) and every request sent with the
OpenAI API at its arrival time; the simulated side runs the same request list through the same
policy objects on a virtual clock, with the scheduler's wall-clock constants stretched to the
replay's speed (`Scenario.as_live`). Each tenant's mean queue time must agree within 20 %, or
within `SLACK_S` for the quiet tenants' sub-second means: five live runs on 2026-11-28 spread
0.33–0.57 s around simulated 0.42–0.55 s (timing jitter over a few dozen requests), and
quiet-2's live mean sat 13–20 % below the simulator's in each (0.38–0.41 s vs 0.472 s). That
bias is real and not explained yet (the simulator waits longer than the live stack for the
quiet tenants); a 20 % bound alone made this test a coin toss (it failed CI on both the old
and the new code), and the slack keeps the noisy tenant's 78 s held to 20 %.
"""

from __future__ import annotations

import asyncio

import pytest

from control_plane.sim.cluster import unit_factors
from control_plane.sim.compare import compare
from control_plane.sim.live_bench import LiveTarget, replay
from control_plane.sim.live_report import live_document
from control_plane.sim.runner import results_document, run_policy
from control_plane.sim.scenario import load_scenario
from control_plane.sim.setup import PolicySpec
from control_plane.sim.workload import build_workload
from tests.support.cluster import Cluster

SPEED = 2.0
TOLERANCE = 0.2
SLACK_S = 0.15
"""Absolute agreement enough for a quiet tenant's sub-second mean: the largest difference in
the five runs was 0.094 s (quiet-2), nearly all of it the bias below, so 0.1 s was as much a
coin toss as 20 %."""


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
    sim = results_document(
        scenario, [run_policy(scenario.as_live(SPEED), PolicySpec("vtc", "vtc"), specs)]
    )

    diffs = compare(sim, live)
    print("\nqueue_mean_s per tenant, sim vs live:")
    for d in diffs:
        print(f"  {d.tenant:8} sim {d.a:.3f} s  live {d.b:.3f} s  ({d.relative:.1%})")
    statuses = {r.status for r in records}
    assert statuses <= {"ok", "rejected"}, statuses  # nothing lost; only the cap's 429s
    assert [d.tenant for d in diffs] == [t.name for t in scenario.tenants]
    bad = [
        d
        for d in diffs
        if d.a is None
        or d.b is None
        or (abs(d.a - d.b) > SLACK_S and (d.relative or 0.0) > TOLERANCE)
    ]
    assert not bad, f"{bad}\n{cluster.logs()}"
