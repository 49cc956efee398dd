"""Simulator speed: simulated requests per CPU-minute (target ≥ 100,000 on a 2-core box).

CPU time is the process's (`time.process_time`), measured around the simulation loop only
(workload generation and metrics excluded), so other load on the machine barely moves it.
"""

from __future__ import annotations

import platform
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from control_plane.sim.runner import run_policy
from control_plane.sim.scenario import load_scenario
from control_plane.sim.setup import PolicySpec
from control_plane.sim.workload import build_workload

DEFAULT_SCENARIOS = ("exfairs-V", "vtc-overload", "hmfs-multimodal")
DEFAULT_POLICIES = ("fcfs", "vtc", "exfairs", "hmfs")


@dataclass(frozen=True)
class SpeedSample:
    scenario: str
    policy: str
    requests: int
    output_tokens: int
    simulated_s: float
    cpu_s: float

    @property
    def requests_per_cpu_minute(self) -> float:
        return self.requests / self.cpu_s * 60.0 if self.cpu_s > 0 else float("inf")


def measure(
    scenarios: Sequence[str], policies: Sequence[str], duration_s: float | None = None
) -> list[SpeedSample]:
    samples = []
    for name in scenarios:
        scenario = load_scenario(name).with_overrides(duration_s=duration_s)
        specs = build_workload(scenario)
        for policy in policies:
            run = run_policy(scenario, PolicySpec(policy, policy), specs)
            samples.append(
                SpeedSample(
                    scenario=scenario.name,
                    policy=policy,
                    requests=len(run.records),
                    output_tokens=sum(r.n_out for r in run.records),
                    simulated_s=run.info.end_s,
                    cpu_s=run.cpu_s,
                )
            )
    return samples


def report(samples: Sequence[SpeedSample]) -> dict[str, Any]:
    requests = sum(s.requests for s in samples)
    cpu = sum(s.cpu_s for s in samples)
    return {
        "machine": {"python": platform.python_version(), "processor": platform.machine()},
        "total": {
            "requests": requests,
            "cpu_s": cpu,
            "requests_per_cpu_minute": requests / cpu * 60.0 if cpu > 0 else None,
        },
        "runs": [
            {**asdict(s), "requests_per_cpu_minute": s.requests_per_cpu_minute} for s in samples
        ],
    }
