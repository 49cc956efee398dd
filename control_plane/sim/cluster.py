"""The simulated cluster: engine instances from worker profiles, and what the scheduler sees.

A `SimWorker` is the simulator's `WorkerProbe`: it renders one `workers.engine.Engine` as the
`WorkerView` that admission and placement read, with the in-flight counts `SchedulerCore`
keeps (as it does live). Engine fields (running, waiting, KV usage, preemptions) are read
exactly, at the decision instant: the simulator's stand-in for the live scheduler's scrape of
`vllm:*` metrics.
"""

from __future__ import annotations

from dataclasses import dataclass

from control_plane.core.unified import ModelShape, unit_factor
from control_plane.core.worker_view import WorkerView
from control_plane.sim.scenario import Scenario
from workers.engine.engine import Engine
from workers.engine.profile import LatencyModel
from workers.engine.step import EngineConfig


@dataclass(slots=True)
class SimWorker:
    """One engine, seen by the scheduler (a `WorkerProbe`)."""

    id: str
    model: str
    engine: Engine
    index: int = 0
    """Position in the cluster's worker list."""
    last_preemption_at: float | None = None
    streams: bool = True
    """Whether its answers stream. An image model's do not (`/v1/images/generations` answers
    once, every image done), so live the gateway reports no progress for them: the scheduler
    is charged their output, and the client sees it, only when they end."""

    def view(
        self, inflight: int, inflight_tokens: int, prefilling: int = 0, prefill_tokens: int = 0
    ) -> WorkerView:
        engine = self.engine
        return WorkerView(
            id=self.id,
            model=self.model,
            max_num_seqs=engine.config.max_num_seqs,
            kv_tokens=engine.kv_capacity_tokens,
            inflight=inflight,
            inflight_tokens=inflight_tokens,
            prefilling=prefilling,
            prefill_tokens=prefill_tokens,
            running=engine.num_running,
            waiting=engine.num_waiting,
            kv_usage=engine.kv_usage,
            preemptions=engine.num_preemptions,
            last_preemption_at=self.last_preemption_at,
        )


def build_workers(scenario: Scenario, speed: float = 1.0) -> list[SimWorker]:
    """Every worker of the scenario's cluster, engines seeded from the scenario seed."""
    workers: list[SimWorker] = []
    for group in scenario.cluster:
        profile = scenario.profile(group)
        overrides = {
            key: value
            for key in ("max_num_seqs", "max_num_batched_tokens", "kv_tokens")
            if (value := getattr(group, key)) is not None
        }
        config = EngineConfig.from_profile(profile, **overrides)
        latency = LatencyModel(profile, speed=group.speed * speed)
        for i in range(group.count):
            index = len(workers)
            worker_id = f"{group.name or profile.name}-{i}"
            engine = Engine(latency, config, seed=scenario.seed * 1009 + index)
            streams = profile.model.kind != "image"
            workers.append(SimWorker(worker_id, profile.model.name, engine, index, streams=streams))
    ids = [w.id for w in workers]
    if len(set(ids)) != len(ids):
        raise ValueError("worker ids collide: give worker groups distinct `name`s")
    return workers


def unit_factors(scenario: Scenario) -> dict[str, float]:
    """Model name → Unified Token factor: the scenario's override, else `(d/4096)·(N/32)`."""
    out: dict[str, float] = {}
    for group in scenario.cluster:
        info = scenario.profile(group).model
        override = scenario.models.get(info.name)
        shape = ModelShape(
            kind=info.kind,
            hidden_size=info.hidden_size,
            num_layers=info.num_layers,
            unified_cost_factor=override.unified_cost_factor if override else None,
        )
        out[info.name] = unit_factor(shape)
    return out
