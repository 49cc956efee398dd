"""Small hand-built scenarios for the simulator tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from control_plane.sim.runner import PolicyRun, run_policy
from control_plane.sim.scenario import Scenario, parse_scenario
from control_plane.sim.setup import PolicySpec


def scenario_dict(**overrides: Any) -> dict[str, Any]:
    """Two tenants sending 256/64 requests to one llama3-8b-a100 for 20 s."""
    data: dict[str, Any] = {
        "name": "tiny",
        "seed": 3,
        "duration_s": 20,
        "drain_s": 60,
        "cluster": [{"profile": "llama3-8b-a100"}],
        "tenants": [
            {"name": "a", "slo": {"e2e_s": 10}},
            {"name": "b", "weight": 2, "slo": {"ttft_s": 1, "tpot_s": 0.05}},
        ],
        "classes": {
            "small": {
                "prompt": {"dist": "uniform", "low": 100, "high": 400},
                "output": {"dist": "uniform", "low": 20, "high": 120},
            }
        },
        "workload": [
            {"tenant": "a", "class": "small", "arrival": {"process": "poisson", "rate": 5}},
            {"tenant": "b", "class": "small", "arrival": {"process": "poisson", "rate": 5}},
        ],
    }
    data.update(overrides)
    return data


def tiny(base_dir: Path | None = None, **overrides: Any) -> Scenario:
    return parse_scenario(scenario_dict(**overrides), base_dir)


def run(scenario: Scenario, policy: str, **params: Any) -> PolicyRun:
    return run_policy(scenario, PolicySpec(policy, policy, params))


def write_trace(
    path: Path, rows: list[tuple[float, int, int, str]], *, caps: list[int] | None = None
) -> Path:
    """A CSV trace with columns timestamp, prompt_tokens, output_tokens, tenant (and the
    clients' max_tokens when `caps` gives them)."""
    lines = ["timestamp,prompt_tokens,output_tokens,tenant" + (",max_tokens" if caps else "")]
    for k, (t, n_in, n_out, tenant) in enumerate(rows):
        lines.append(f"{t},{n_in},{n_out},{tenant}" + (f",{caps[k]}" if caps else ""))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
