"""Every shipped scenario parses and runs; the schema refuses what it cannot mean."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from control_plane.core.job import Slo
from control_plane.sim.request_spec import DEFAULT_MAX_TOKENS, RequestSpec
from control_plane.sim.scenario import (
    SCENARIOS_DIR,
    list_scenarios,
    load_scenario,
    parse_scenario,
    resolve_scenario,
)
from control_plane.sim.workload import build_workload
from tests.control_plane.sim.builders import run, scenario_dict, tiny

SHIPPED = list_scenarios()


def test_the_issue_s_scenarios_are_shipped() -> None:
    expected = {f"exfairs-{n}" for n in ("I", "II", "III", "IV", "V", "VI")} | {
        "vtc-overload",
        "vtc-proportional",
        "vtc-on-off",
        "vtc-short-long",
        "vtc-dist-shift",
        "hmas-stress",
        "hmfs-multimodal",
        "noisy-neighbour",
        "noisy-neighbour-short",
    }
    assert expected <= set(SHIPPED)


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_scenario_parses_and_runs_a_few_seconds(name: str) -> None:
    scenario = load_scenario(name).with_overrides(duration_s=3.0)
    assert scenario.description
    assert "calibration" in resolve_scenario(name).read_text(encoding="utf-8").lower()
    result = run(scenario.model_copy(update={"drain_s": 5.0}), "vtc")
    statuses = {r.status for r in result.records}
    assert statuses <= {"ok", "aborted", "withdrawn", "timeout"}
    # a workflow's later calls arrive when their upstream ends, after its own arrival
    started: dict[str, float] = {}
    for r in result.records:
        key = r.workflow or r.id
        started[key] = min(started.get(key, r.arrival), r.arrival)
    assert all(t < 3.0 for t in started.values())
    assert result.results["requests"] == len(result.records)


def test_resolver_finds_shipped_names_and_paths(tmp_path: Path) -> None:
    assert resolve_scenario("vtc-overload") == SCENARIOS_DIR / "vtc-overload.yaml"
    copy = tmp_path / "mine.yaml"
    copy.write_text((SCENARIOS_DIR / "vtc-overload.yaml").read_text(encoding="utf-8"))
    assert resolve_scenario(str(copy)) == copy
    with pytest.raises(ValueError, match="no scenario"):
        resolve_scenario("no-such-scenario")


def test_unknown_keys_are_refused() -> None:
    with pytest.raises(ValidationError, match="extra"):
        tiny(durration_s=5)


def test_cross_references_are_checked() -> None:
    bad_tenant = scenario_dict()
    bad_tenant["workload"][0]["tenant"] = "ghost"
    with pytest.raises(ValueError, match="unknown tenant"):
        tiny(workload=bad_tenant["workload"])
    bad_model = scenario_dict()
    bad_model["classes"]["small"]["model"] = "gpt-9"
    with pytest.raises(ValueError, match="not served"):
        tiny(classes=bad_model["classes"])
    with pytest.raises(ValidationError, match="exactly one of rate"):
        tiny(
            workload=[
                {
                    "tenant": "a",
                    "class": "small",
                    "arrival": {"process": "poisson", "rate": 1, "rate_per_min": 60},
                }
            ]
        )


def test_slo_precedence_and_agent_expansion() -> None:
    scenario = tiny(
        tenants=[
            {
                "name": "a",
                "slo": {"e2e_s": 30, "ttft_s": 9},
                "apps": [
                    {
                        "name": "app",
                        "slo": {"ttft_s": 5},
                        "agents": [{"name": "w", "count": 3, "slo": {"tpot_s": 0.1}}],
                    }
                ],
            },
            {"name": "b"},
        ],
        classes={
            "small": {
                "prompt": {"dist": "fixed", "value": 10},
                "output": {"dist": "fixed", "value": 5},
                "slo": {"e2e_s": 99},
            }
        },
        workload=[
            {
                "tenant": "a",
                "agent": "*",
                "class": "small",
                "slo": {"e2e_s": 12},
                "arrival": {"process": "poisson", "rate": 2},
            }
        ],
    )
    specs = build_workload(scenario)
    assert {s.agent for s in specs} == {"w-0", "w-1", "w-2"}
    slo = specs[0].slo
    assert (slo.e2e_s, slo.ttft_s, slo.tpot_s) == (12, 5, 0.1)  # stream > agent > app > tenant


def test_prompts_are_cut_to_fit_the_model_context() -> None:
    scenario = tiny(
        classes={
            "big": {
                "prompt": {"dist": "fixed", "value": 20_000},
                "output": {"dist": "fixed", "value": 500},
            }
        },
        workload=[{"tenant": "a", "class": "big", "arrival": {"process": "poisson", "rate": 1}}],
    )
    specs = build_workload(scenario)
    # llama3's max_model_len 8192: the prompt keeps one token of room, the cap is what is left
    assert specs and {(s.n_in, s.cap, s.n_out) for s in specs} == {(8191, 1, 1)}


def test_a_prompt_cut_to_the_context_does_not_reveal_the_answer_s_length() -> None:
    """The prompt is cut by what the client knows, the cap to the room after it; the answer is
    cut at the cap. Before, the prompt was cut to leave exactly the true answer's room, so the
    cap (what the scheduler sees) was the true length."""
    scenario = tiny(
        classes={
            "long": {
                "prompt": {"dist": "fixed", "value": 8000},
                "output": {"dist": "uniform", "low": 200, "high": 400},
            }
        },
        workload=[{"tenant": "a", "class": "long", "arrival": {"process": "poisson", "rate": 1}}],
    )
    specs = build_workload(scenario)
    assert len(specs) > 5
    assert {(s.n_in, s.cap, s.n_out) for s in specs} == {(8000, 192, 192)}


def test_the_documented_example_is_a_valid_scenario() -> None:
    text = (SCENARIOS_DIR.parent / "docs" / "scenarios.md").read_text(encoding="utf-8")
    example = text.split("```yaml\n", 1)[1].split("```", 1)[0]
    scenario = parse_scenario(yaml.safe_load(example))
    specs = build_workload(scenario.with_overrides(duration_s=20))
    assert {s.tenant for s in specs} == {"acme", "solo"}
    assert {s.cls for s in specs if s.tenant == "solo"} == {"chat", "docs"}


def test_a_spec_without_a_cap_sends_the_client_default_never_its_true_length() -> None:
    spec = RequestSpec("r", 0.0, "t", "a", "g", "m", None, None, 10, 37, Slo(), 0)
    assert spec.cap == DEFAULT_MAX_TOKENS
    with pytest.raises(ValueError, match="exceeds its cap"):
        RequestSpec("r", 0.0, "t", "a", "g", "m", None, None, 10, 37, Slo(), 0, max_tokens=20)
