"""Simulator speed: simulated requests per CPU-minute (target ≥ 500,000 on a 2-core box).

CPU time is the process's (`time.process_time`), measured around the simulation loop only
(workload generation and metrics excluded), so other load on the machine barely moves it.
With `split`, each run also says where that CPU went, phase by phase (`phase_timer.py`); the
timers add about 1.2 µs per wrapped call, so a split run is slightly slower.
"""

from __future__ import annotations

import platform
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from control_plane.sim.engine_loop import Simulator
from control_plane.sim.phase_timer import PhaseTimer
from control_plane.sim.request_spec import RequestSpec
from control_plane.sim.runner import run_policy
from control_plane.sim.scenario import Scenario
from control_plane.sim.setup import PolicySpec

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
    phases: dict[str, float] | None = field(default=None)
    """CPU seconds per phase of the loop (`phase_timer.PHASES`), for a split run."""

    @property
    def requests_per_cpu_minute(self) -> float:
        return self.requests / self.cpu_s * 60.0 if self.cpu_s > 0 else float("inf")


def measure(
    workloads: Sequence[tuple[Scenario, list[RequestSpec]]],
    policies: Sequence[str],
    split: bool = False,
) -> list[SpeedSample]:
    """Run every scenario (with its workload, built and so checked before any run) under every
    policy (checked by the caller: `arbiter sim speed` builds each run's scheduler first)."""
    samples = []
    for scenario, specs in workloads:
        for policy in policies:
            timer = PhaseTimer() if split else None
            attach: Callable[[Simulator], None] | None = timer.attach if timer else None
            run = run_policy(scenario, PolicySpec(policy, policy), specs, instrument=attach)
            samples.append(
                SpeedSample(
                    scenario=scenario.name,
                    policy=policy,
                    requests=len(run.records),
                    output_tokens=sum(r.n_out for r in run.records),
                    simulated_s=run.info.end_s,
                    cpu_s=run.cpu_s,
                    phases=timer.finish(run.cpu_s) if timer else None,
                )
            )
    return samples


def phase_rows(sample: SpeedSample) -> list[dict[str, Any]]:
    """A split run's phases: CPU seconds, per request, per output token and share of the run."""
    rows = []
    for phase, cpu in (sample.phases or {}).items():
        rows.append(
            {
                "phase": phase,
                "cpu_s": cpu,
                "ms_per_request": cpu / sample.requests * 1e3 if sample.requests else None,
                "us_per_output_token": (
                    cpu / sample.output_tokens * 1e6 if sample.output_tokens else None
                ),
                "share": cpu / sample.cpu_s if sample.cpu_s > 0 else None,
            }
        )
    return rows


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
            {
                **asdict(s),
                "requests_per_cpu_minute": s.requests_per_cpu_minute,
                "phases": phase_rows(s) if s.phases is not None else None,
            }
            for s in samples
        ],
    }
