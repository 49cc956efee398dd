"""Demand, received, entitlement and the starved flag from a real scheduler core.

One worker with 4 slots; every request takes one second. `heavy` floods 40 requests at
t = 0; `light` sends one request a second from t = 1. Under FCFS light's requests queue
behind the flood: it is backlogged and receives nothing it is entitled to (starved). Under
VTC light's requests jump the queue: it receives what it asks, however small (ok).
"""

from __future__ import annotations

import json

import pytest

from control_plane.contracts.checkpoints import LiveView, NodeCount, decode_live_view
from control_plane.contracts.knobs import PluginChoice
from control_plane.contracts.workers import WorkerEntry, WorkerSample
from control_plane.core.job import Job, Outcome
from control_plane.core.ledger import Ledger
from control_plane.core.scheduler_core import SchedulerCore
from control_plane.scheduler.node_loads import node_loads
from control_plane.scheduler.rebuild import build_core
from control_plane.scheduler.views import live_view
from control_plane.scheduler.workers import observe, sync_workers

T0 = 1_000.0
COST = 50 + 2 * 100  # prompt + 2 × max_tokens, the door's estimate (W_P 1, W_Q 2)


def _job(i: int, tenant: str, at: float) -> Job:
    return Job(f"{tenant}-{i}", tenant, at, n_in=50, max_tokens=100, model="m", seq=i)


def _run(policy: str, seconds: int) -> SchedulerCore:
    core = build_core({"policy": PluginChoice(policy)}, Ledger(), policy)
    worker = WorkerEntry(id="w1", url="http://127.0.0.1:9", model="m", max_num_seqs=4)
    sync_workers(core, [worker])
    observe(core, "w1", WorkerSample(True, T0))
    for seq in range(1, 41):
        core.arrive(_job(seq, "heavy", T0), None, T0)
    for step in range(seconds):
        now = T0 + step
        if step >= 1:
            core.arrive(_job(100 + step, "light", now), None, now)
        for run in list(core.running.values()):
            core.progress(run.job.id, 100, now)
            core.complete(run.job.id, Outcome("ok", 50, 100, e2e_s=1.0), now)
        core.decide(now)
    return core


def _by_path(nodes: list[NodeCount]) -> dict[tuple[str, ...], NodeCount]:
    return {n.path: n for n in nodes}


def test_a_backlogged_light_tenant_behind_a_flood_is_starved() -> None:
    core = _run("fcfs", 8)
    nodes = _by_path(node_loads(core, T0 + 8))
    heavy, light = nodes[("heavy",)], nodes[("light",)]
    assert light.queued == 7 and light.oldest_wait_s == pytest.approx(7.0)
    assert light.demand_rate == pytest.approx(7 * COST / 60)
    assert light.service_rate == 0.0 and light.backlogged
    assert light.entitled_rate == pytest.approx(light.demand_rate)  # asks less than half
    assert light.status == "starved"
    assert heavy.demand_rate == pytest.approx(40 * COST / 60)
    assert heavy.service_rate == pytest.approx(heavy.entitled_rate + light.entitled_rate)
    assert heavy.status == "over-served"
    assert nodes[("light", "default", "default")].status == "ok"  # alone among its siblings
    assert heavy.wait_p95_s is not None and heavy.wait_p95_s >= 6.0


def test_a_light_tenant_that_asks_less_is_not_flagged() -> None:
    core = _run("vtc", 8)
    nodes = _by_path(node_loads(core, T0 + 8))
    heavy, light = nodes[("heavy",)], nodes[("light",)]
    assert light.queued == 0 and not light.backlogged
    assert light.received_share is not None and light.received_share < 0.3
    assert heavy.backlogged  # the flood waits, but gets more than its share of the rest
    assert (heavy.status, light.status) == ("ok", "ok")


def test_live_view_round_trips_the_node_loads() -> None:
    core = _run("fcfs", 8)
    live = live_view(core, "leader-x", T0 + 8)
    again = decode_live_view(live.to_json())
    assert isinstance(again, LiveView)
    assert json.loads(json.dumps(again.to_json())) == json.loads(json.dumps(live.to_json()))
    assert {n.status for n in again.nodes} == {"ok", "starved", "over-served"}
    assert (again.window_s, again.tolerance, again.wait_threshold_s) == (60.0, 0.2, 2.0)
    assert sum(n.queued for n in again.nodes if len(n.path) == 1) == again.queue_depth
