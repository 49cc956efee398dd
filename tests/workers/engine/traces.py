"""Plain helpers for engine tests: build engines and requests, run them, read their traces."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from workers.engine.engine import Engine, EngineConfig, EngineRequest, StepResult
from workers.engine.profile import LatencyModel, load_profile
from workers.engine.replay import replay


def make_engine(profile: str = "llama3-8b-a100", seed: int = 0, **config: Any) -> Engine:
    p = load_profile(profile)
    return Engine(LatencyModel(p), EngineConfig.from_profile(p, **config), seed=seed)


def req(rid: str, n_in: int, n_out: int, priority: int = 0, arrival: float = 0.0) -> EngineRequest:
    return EngineRequest(rid, n_in, n_out, priority=priority, arrival=arrival)


def at(t: float, *reqs: EngineRequest) -> list[tuple[float, EngineRequest]]:
    return [(t, r) for r in reqs]


def run(engine: Engine, arrivals: list[tuple[float, EngineRequest]]) -> list[StepResult]:
    return list(replay(engine, arrivals))


@dataclass
class Summary:
    """Per-request facts read back from a trace."""

    tokens: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    first_at: dict[str, float] = field(default_factory=dict)
    finished_at: dict[str, float] = field(default_factory=dict)
    preempted: list[str] = field(default_factory=list)


def summarize(trace: list[StepResult]) -> Summary:
    s = Summary()
    for step in trace:
        s.preempted.extend(step.preempted)
        for ev in step.tokens:
            assert ev.n == 1
            assert ev.req_id not in s.finished_at, f"{ev.req_id} produced after finishing"
            assert ev.first == (s.tokens[ev.req_id] == 0)
            s.tokens[ev.req_id] += ev.n
            if ev.first:
                s.first_at[ev.req_id] = step.end
            if ev.finished:
                s.finished_at[ev.req_id] = step.end
    return s


def finish_order(trace: list[StepResult]) -> list[str]:
    return [ev.req_id for step in trace for ev in step.tokens if ev.finished]
