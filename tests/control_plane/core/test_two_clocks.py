"""One scheduler core, two clocks: a simulated run replayed through the live scheduler's inputs.

The simulator drives a recording `SchedulerCore`; every call it makes (arrivals, withdrawals,
progress reports, completions, ticks, decisions with the worker views they saw) is replayed
into a core built the live way (`build_core` from knobs) through the live scheduler's own
input handlers: arrivals as stored request records (`arrive_each`: envelope → `parse_job`),
progress, completions and withdrawals as typed events that went through the stream's JSON
codec (`apply_event`: one event at a time, cumulative `n_out`, latencies from timestamps),
worker state as registry records plus scrapes (`sync_workers`, `observe`). The decisions must
be the same, one by one.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from control_plane.contracts.events import Complete, Event, Progress, Withdrawn, decode, encode
from control_plane.contracts.knobs import decode_knob
from control_plane.contracts.requests import decode_record
from control_plane.contracts.workers import WorkerEntry, WorkerSample
from control_plane.core.dispatcher import Decision
from control_plane.core.job import Job, Outcome
from control_plane.core.ledger import Ledger
from control_plane.core.scheduler_core import SchedulerCore
from control_plane.core.worker_view import WorkerView
from control_plane.scheduler.entries import apply_event, arrive_each
from control_plane.scheduler.rebuild import build_core
from control_plane.scheduler.workers import observe, sync_workers
from control_plane.sim.engine_loop import Simulator
from control_plane.sim.scenario import Scenario
from control_plane.sim.setup import PolicySpec, build_setup
from control_plane.sim.workload import build_workload
from tests.control_plane.sim.builders import tiny

Call = tuple[Any, ...]
Made = list[tuple[str, str, int]]


@dataclass
class Trace:
    calls: list[Call] = field(default_factory=list)


class RecordingCore(SchedulerCore):
    """A `SchedulerCore` that writes down every input and every decision."""

    def __init__(self, core: SchedulerCore, trace: Trace) -> None:
        super().__init__(core.dispatcher, core.failure_cooldown_s)
        self.trace = trace

    def arrive(self, job: Job, weights: dict[str, float] | None, now: float) -> None:
        self.trace.calls.append(("arrive", job.to_json(), now))
        super().arrive(job, weights, now)

    def withdraw(self, job_id: str) -> Job | None:
        self.trace.calls.append(("withdraw", job_id))
        return super().withdraw(job_id)

    def progress_batch(self, reports: Sequence[tuple[str, int]], now: float) -> None:
        self.trace.calls.append(("progress", list(reports), now))
        super().progress_batch(reports, now)

    def complete(self, job_id: str, outcome: Outcome, now: float) -> Job | None:
        self.trace.calls.append(("complete", job_id, outcome, now))
        return super().complete(job_id, outcome, now)

    def tick(self, now: float) -> None:
        self.trace.calls.append(("tick", now))
        super().tick(now)

    def decide(self, now: float, limit: int | None = None) -> list[Decision]:
        views = [slot.view() for slot in self.workers.values()]
        decisions = super().decide(now, limit)
        self.trace.calls.append(("decide", now, views, _made(decisions)))
        return decisions


def contended() -> Scenario:
    """Tenant a sends twice b's rate, together above the worker's capacity: queues build up,
    so the policy's order decides who goes next (FCFS and VTC part ways here)."""
    workload = [
        {"tenant": "a", "class": "small", "arrival": {"process": "poisson", "rate": 40}},
        {"tenant": "b", "class": "small", "arrival": {"process": "poisson", "rate": 20}},
    ]
    return tiny(duration_s=10, workload=workload)


def _made(decisions: list[Decision]) -> Made:
    return [(d.job.id, d.worker.id, d.reserved_tokens) for d in decisions]


def simulate(scenario: Scenario, policy: str) -> tuple[Trace, Simulator]:
    setup = build_setup(scenario, PolicySpec(policy, policy))
    trace = Trace()
    core = RecordingCore(SchedulerCore(setup.dispatcher), trace)
    sim = Simulator(setup, build_workload(scenario), core=core)
    sim.run()
    return trace, sim


def live_core(scenario: Scenario, policy: str) -> SchedulerCore:
    """The live scheduler's construction, from the knobs an operator would set."""
    sched = scenario.scheduler
    weights = {t.name: t.weight for t in scenario.tenants}
    knobs = {
        "policy": {"name": policy, "params": {}},
        "admission": {"name": sched.admission, "params": sched.admission_params},
        "placement": {"name": sched.placement, "params": sched.placement_params},
        "weights": weights,
    }
    typed = {name: decode_knob(name, value) for name, value in knobs.items()}  # as stored
    return build_core(typed, Ledger(window_s=sched.ledger_window_s), policy)


def _scrape(core: SchedulerCore, views: list[WorkerView], now: float) -> None:
    records = [
        WorkerEntry(
            v.id,
            f"http://{v.id}",
            "active",
            v.model,
            max_num_seqs=v.max_num_seqs,
            kv_tokens=v.kv_tokens,
        )
        for v in views
    ]
    sync_workers(core, records)
    for v in views:
        sample = WorkerSample(
            True,
            now,
            running=float(v.running),
            waiting=float(v.waiting),
            kv_usage=v.kv_usage,
            preemptions_total=float(v.preemptions),
            kv_tokens=v.kv_tokens,
        )
        observe(core, v.id, sample)


def _complete_event(job_id: str, o: Outcome) -> Complete:
    """The gateway's `complete` event for an outcome (times relative to arrival = 0)."""
    first = o.ttft_s
    finished = o.e2e_s if o.e2e_s is not None else 0.0
    if first is not None and o.tpot_s is not None and o.n_out >= 2:
        finished = first + o.tpot_s * (o.n_out - 1)
    return Complete(
        id=job_id,
        status=o.status,
        finished=finished,
        n_in=o.n_in,
        n_out=o.n_out,
        arrival=0.0,
        dispatched=o.queue_s,
        first_token=first,
    )


def _wire(event: Event) -> Event:
    """The event as a reader gets it back from the stream (JSON both ways)."""
    return decode(json.loads(json.dumps(encode(event))))


def replay(trace: Trace, core: SchedulerCore) -> list[tuple[float, Made, Made]]:
    """Feed every call through the live handlers; → (time, simulated, live) per decision."""
    out: list[tuple[float, Made, Made]] = []
    for call in trace.calls:
        kind = call[0]
        if kind == "arrive":
            job, now = call[1], call[2]
            hash_fields = {"envelope": json.dumps({"job": job}), "seq": str(job["seq"])}
            record = decode_record(job["id"], {**hash_fields, "status": "queued"})
            assert record is not None and arrive_each(core, [(job["id"], record)], now) == []
        elif kind == "withdraw":
            apply_event(core, _wire(Withdrawn(call[1], "queue_timeout")), 0.0)
        elif kind == "progress":
            for job_id, n_out in call[1]:
                apply_event(core, _wire(Progress(job_id, n_out, call[2])), call[2])
        elif kind == "complete":
            apply_event(core, _wire(_complete_event(call[1], call[2])), call[3])
        elif kind == "tick":
            core.tick(call[1])
        else:
            now, views, made = call[1], call[2], call[3]
            _scrape(core, views, now)
            out.append((now, made, _made(core.decide(now))))
    return out


@pytest.mark.parametrize("policy", ["fcfs", "vtc", "hmfs", "exfairs", "edf", "sjf"])
def test_the_live_scheduler_decides_what_the_simulator_decided(policy: str) -> None:
    scenario = contended()
    trace, sim = simulate(scenario, policy)
    decisions = [c for c in trace.calls if c[0] == "decide" and c[3]]
    assert len(decisions) > 100  # a real run: many decision cycles
    kinds = {c[0] for c in trace.calls}
    assert {"arrive", "progress", "complete", "tick"} <= kinds
    compared = replay(trace, live_core(scenario, policy))
    for now, simulated, live in compared:
        assert live == simulated, f"t={now}"
    assert sum(len(made) for _, made, _ in compared) > 500
    assert sum(r.status == "ok" for r in sim.records) > 500


def test_the_replay_notices_a_live_core_that_decides_differently() -> None:
    """The comparison can fail: the same trace replayed under another policy diverges."""
    scenario = contended()
    trace, _ = simulate(scenario, "vtc")
    diverged = [1 for _, sim, live in replay(trace, live_core(scenario, "fcfs")) if sim != live]
    assert diverged
