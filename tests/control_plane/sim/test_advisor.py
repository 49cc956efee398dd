"""The `llm` selector in the simulator: questions answered over real HTTP while the simulated
clock stands still; a dead endpoint means the rules, one fallback per period."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from control_plane.control.meta import AUTO
from control_plane.sim.runner import run_policy
from control_plane.sim.setup import PolicySpec
from tests.control_plane.sim.builders import tiny
from tests.support.ports import free_port
from tests.support.vllm_server import running_vllm

OVERLOAD = [
    {"tenant": "a", "class": "small", "arrival": {"process": "poisson", "rate": 40}},
    {"tenant": "b", "class": "small", "arrival": {"process": "poisson", "rate": 40}},
]


def auto_llm(llm: dict[str, Any]) -> dict[str, Any]:
    params = {"selector": "llm", "llm": llm, "period_s": 4.0, "pool": ["fcfs", "sjf", "wfq"]}
    scenario = tiny(workload=OVERLOAD, duration_s=20, drain_s=20)
    return run_policy(scenario, PolicySpec("auto-llm", AUTO, params)).results


@pytest.fixture(scope="module")
def vllm() -> Iterator[tuple[str, str]]:
    with running_vllm() as server:
        yield server


def test_a_dead_endpoint_means_the_rules_every_period() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    res = auto_llm({"model": "m", "url": url, "timeout_s": 1.0})
    stats = res["selector"]["stats"]
    assert stats["asked"] >= 4 and stats["invalid"] == stats["asked"]
    assert stats["answered"] == 0 and stats["timeout"] == 0  # answered at once, as failed
    chosen = [s for s in res["switches"] if "bypass" not in s["reason"]
              and not s["reason"].startswith("rollback")]  # fmt: skip
    assert chosen, "an overload the rules act on"
    assert all(s["reason"].startswith("llm invalid (no reply); rules: ") for s in chosen)


@pytest.mark.vllm
def test_a_real_model_answers_every_question_within_the_pool(vllm: tuple[str, str]) -> None:
    url, model = vllm
    res = auto_llm({"model": model, "url": url, "constrain": "vllm_regex", "timeout_s": 2.0})
    stats = res["selector"]["stats"]
    assert stats["asked"] >= 4 and stats["answered"] == stats["asked"]
    chosen = [s for s in res["switches"] if s["reason"].startswith("llm: ")]
    assert all(s["to"] in ("fcfs", "sjf", "wfq") for s in chosen)
