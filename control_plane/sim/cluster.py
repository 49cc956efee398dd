"""The simulated cluster: engine instances from worker profiles, and what the scheduler sees.

A `SimWorker` pairs one `workers.engine.Engine` with the scheduler-side bookkeeping that the
live scheduler keeps per worker (its in-flight requests and their reserved KV tokens), and
renders both as the `WorkerView` that admission and placement read. Engine fields (running,
waiting, KV usage, preemptions) are read exactly, at the decision instant: the simulator's
stand-in for the live scheduler's scrape of `vllm:*` metrics.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from control_plane.placement.worker_view import WorkerView
from control_plane.policies.unified import ModelShape, unit_factor
from control_plane.sim.scenario import Scenario
from workers.engine.engine import Engine
from workers.engine.profile import LatencyModel
from workers.engine.step import EngineConfig

BASE_MODEL = ModelShape(kind="llm", hidden_size=4096, num_layers=32)
"""The Unified Token base (Llama-3-8B: 4096 hidden, 32 layers); its token costs exactly 1."""


@dataclass(slots=True)
class SimWorker:
    """One engine plus the scheduler's in-flight records for it."""

    id: str
    model: str
    engine: Engine
    index: int = 0
    """Position in the cluster's worker list."""
    inflight: dict[str, int] = field(default_factory=dict)
    """Job id → KV tokens admission reserved for it."""
    inflight_tokens: int = 0
    last_preemption_at: float | None = None

    def view(self) -> WorkerView:
        engine = self.engine
        return WorkerView(
            id=self.id,
            model=self.model,
            max_num_seqs=engine.config.max_num_seqs,
            kv_tokens=engine.kv_capacity_tokens,
            inflight=len(self.inflight),
            inflight_tokens=self.inflight_tokens,
            running=engine.num_running,
            waiting=engine.num_waiting,
            kv_usage=engine.kv_usage,
            preemptions=engine.num_preemptions,
            last_preemption_at=self.last_preemption_at,
        )

    def hold(self, job_id: str, reserved: int) -> None:
        self.inflight[job_id] = reserved
        self.inflight_tokens += reserved

    def release(self, job_id: str) -> None:
        self.inflight_tokens -= self.inflight.pop(job_id, 0)


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
            workers.append(SimWorker(worker_id, profile.model.name, engine, index))
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
        out[info.name] = unit_factor(shape, BASE_MODEL)
    return out
