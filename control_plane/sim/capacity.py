"""Capacity of a scenario's worker pools for its own request mix: how scenarios are calibrated.

`measure_capacity` runs one engine closed-loop — `max_num_seqs` requests outstanding, a new one
added whenever one finishes, lengths cycled from the workload — and reports the completed
requests and output tokens per second after a warm-up. `pool_loads` compares that capacity
(times the pool's worker count) with the load the scenario offers each model: `rho` > 1 means
the pool is overloaded on average.
"""

from __future__ import annotations

from dataclasses import dataclass

from control_plane.sim.cluster import build_workers
from control_plane.sim.scenario import Scenario
from control_plane.sim.workload import build_workload
from workers.engine.engine import Engine
from workers.engine.step import EngineRequest


@dataclass(frozen=True)
class PoolLoad:
    model: str
    workers: int
    offered_rps: float
    capacity_rps: float
    capacity_out_tokens_per_s: float
    mean_n_in: float
    mean_n_out: float

    @property
    def rho(self) -> float:
        return self.offered_rps / self.capacity_rps if self.capacity_rps > 0 else float("inf")


def measure_capacity(
    engine: Engine, lengths: list[tuple[int, int]], horizon_s: float = 300.0, warmup_s: float = 60.0
) -> tuple[float, float]:
    """(requests/s, output tokens/s) of `engine` kept saturated with `lengths` (cycled)."""
    if not 0 <= warmup_s < horizon_s:
        raise ValueError("need 0 <= warmup_s < horizon_s")
    outstanding = engine.config.max_num_seqs
    issued = done = tokens = 0

    def add(now: float) -> None:
        nonlocal issued
        n_in, n_out = lengths[issued % len(lengths)]
        engine.add(EngineRequest(f"c{issued}", n_in, n_out, arrival=now), now)
        issued += 1

    for _ in range(outstanding):
        add(0.0)
    while (t := engine.next_event_time()) is not None and t < horizon_s:
        for step in engine.advance(t):
            for ev in step.tokens:
                if step.end >= warmup_s:
                    tokens += ev.n
                if ev.finished:
                    done += step.end >= warmup_s
                    add(step.end)
    span = horizon_s - warmup_s
    return done / span, tokens / span


def pool_loads(scenario: Scenario, horizon_s: float = 300.0) -> list[PoolLoad]:
    """Offered load against measured capacity, per served model (see the module docstring)."""
    specs = build_workload(scenario)
    workers = build_workers(scenario)
    out = []
    for model in scenario.served_models():
        pool = [w for w in workers if w.model == model]
        # by arrival: a workflow's later calls (listed after every entry call, stamped with
        # the workflow's arrival) then mix with the entry calls as they do when served
        by_arrival = sorted(specs, key=lambda s: s.arrival)
        mine = [(s.n_in, s.n_out) for s in by_arrival if s.model == model]
        if not mine:
            continue
        rps, tps = measure_capacity(pool[0].engine, mine, horizon_s, horizon_s / 5)
        out.append(
            PoolLoad(
                model=model,
                workers=len(pool),
                offered_rps=len(mine) / scenario.duration_s,
                capacity_rps=rps * len(pool),
                capacity_out_tokens_per_s=tps * len(pool),
                mean_n_in=sum(n for n, _ in mine) / len(mine),
                mean_n_out=sum(n for _, n in mine) / len(mine),
            )
        )
    return out
