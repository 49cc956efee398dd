"""docs/results.md rendering: tables and computed verdicts from real (short) runs."""

from __future__ import annotations

from typing import Any

import pytest

from control_plane.sim.capacity import pool_loads
from control_plane.sim.results_doc import at_rho, llm_spec, plan
from control_plane.sim.results_kairos import kairos_section, replace_section
from control_plane.sim.results_tables import (
    SWEEP_MARK,
    exfairs_claims,
    headline,
    render_markdown,
)
from tests.control_plane.sim.builders import run, tiny


def results(policies: tuple[str, ...], **overrides: Any) -> dict[str, Any]:
    scenario = tiny(**overrides)
    return {p: run(scenario, p).results for p in policies}


def test_the_plan_covers_the_issue_s_experiments() -> None:
    main = [(n, ps) for n, ps, rho in plan() if rho is None and ps[0].label != "fcfs+statera"]
    jobs = {name: [p.label for p in policies] for name, policies in main}
    statera = [n for n, ps, _ in plan() if ps[0].label == "fcfs+statera"]
    assert statera == ["exfairs-I", "hmas-stress", "hmas-drift"]
    sweeps = {(name, rho): [p.label for p in policies] for name, policies, rho in plan() if rho}
    for n in ("I", "II", "III", "IV", "V", "VI"):
        assert jobs[f"exfairs-{n}"] == ["fcfs", "rr", "vtc", "exfairs"]
        swept = ["fcfs", "rr", "vtc", "exfairs", "exfairs-lowers"]
        assert all(sweeps[(f"exfairs-{n}", rho)] == swept for rho in (0.6, 0.8, 1.0, 1.2))
    assert not any(rho for _, _, rho in plan(sweep=False))
    hmas = ["fcfs", "edf", "sjf", "two_lane", "wfq", "vtc", "hmfs", "exfairs", "vllm-default"]
    hmas += ["auto", "auto-bandit", "auto-noguard", "auto-noexec"]
    hmas += ["fcfs+exec", "sjf+exec", "wfq+exec"]
    assert jobs["hmas-stress"] == jobs["hmas-drift"] == hmas
    assert jobs["hmfs-multimodal"][:2] == ["vtc", "hmfs"]
    kairos = ["parrot", "ayo", "kairos", "kairos-rr", "fcfs-slots"]
    for name in ("kairos-qa", "kairos-rg", "kairos-cg", "kairos-colocated"):
        assert jobs[name] == kairos
        assert sweeps[(name, 1.0)] == sweeps[(name, 1.2)] == kairos


def test_the_kairos_section_replaces_itself_in_the_document() -> None:
    result = run(tiny(), "fcfs").results
    section = kairos_section({"kairos-qa": {"parrot": result, "kairos": result}})
    assert section.startswith("## Kairos") and "kairos-qa: incomplete" in section
    doc = "# R\n\n## HMFS\n\nx\n\n## Length prediction\n\ny\n"
    once = replace_section(doc, section)
    assert once.index("## Kairos") < once.index("## Length prediction")
    assert replace_section(once, section) == once


def test_markdown_has_every_table_and_verdict() -> None:
    exfairs = results(("fcfs", "rr", "vtc", "exfairs"))
    phased = results(
        ("fcfs", "edf", "sjf", "two_lane", "wfq"),
        phases=[
            {"name": "early", "start_s": 0, "end_s": 10},
            {"name": "late", "start_s": 10, "end_s": 20},
        ],
    )
    hmfs = results(("vtc", "hmfs"))
    text = render_markdown({"exfairs-I": exfairs, "hmas-stress": phased, "hmfs-multimodal": hmfs})
    assert "### exfairs-I" in text and "| exfairs |" in text
    assert "mean SAFI exfairs" in text and "tokens/s exfairs vs fcfs" in text
    assert "lowest violation rate:" in text or "the violation claim is vacuous" in text
    assert "| early | sjf |" in text and "| late | wfq |" in text
    assert "helper served/demand" in text and "## Reading the results" in text


def test_claims_are_judged_from_the_numbers() -> None:
    base = {"slo_violation_rate": 0.5, "mean_safi": 0.4, "tokens_per_s": 100.0}
    res = {p: dict(base) for p in ("fcfs", "rr", "vtc", "exfairs")}
    res["exfairs"].update(slo_violation_rate=0.4, mean_safi=0.3, tokens_per_s=99.0)
    lines = exfairs_claims(res)
    assert all(line.endswith("claim holds") for line in lines)
    res["exfairs"].update(slo_violation_rate=0.6, mean_safi=0.5, tokens_per_s=90.0)
    assert all(line.endswith("does not hold") for line in exfairs_claims(res))
    for p in res:
        res[p]["slo_violation_rate"] = 0.0
    assert "vacuous" in exfairs_claims(res)[0]


def test_length_prediction_and_the_oracle_comparison_are_rendered() -> None:
    now = results(("fcfs", "rr", "vtc", "exfairs"))
    assert now["vtc"]["length_prediction"]["n"] > 0
    assert now["vtc"]["length_prediction"]["mae"] is not None
    oracle = headline({"exfairs-I": now})
    oracle["exfairs-I"]["vtc"]["slo_violation_rate"] = 0.123
    text = render_markdown({"exfairs-I": now}, oracle)
    assert "## Length prediction" in text and "| exfairs-I | vtc |" in text
    assert "## What changed without the oracle" in text and "0.123 → " in text
    assert "What changed without the oracle" not in render_markdown({"exfairs-I": now})


def test_a_sweep_point_offers_the_asked_share_of_the_measured_capacity() -> None:
    scenario = tiny(duration_s=60)
    for rho in (0.6, 1.2):
        (load,) = pool_loads(at_rho(scenario, rho))
        assert load.rho == pytest.approx(rho, rel=0.1)  # arrivals are random: about rho


def test_sweep_tables_and_verdicts_are_rendered() -> None:
    now = results(("fcfs", "rr", "vtc", "exfairs"))
    points = {f"exfairs-I{SWEEP_MARK}{rho}": now for rho in (1.2, 0.6)}
    text = render_markdown({"exfairs-I": now, **points})
    assert "## ExFairS load sweeps" in text and "| ρ | load_scale | fcfs |" in text
    assert text.index("| 0.6 |") < text.index("| 1.2 |")
    assert "- ρ = 0.6: lowest violation rate" in text
    assert "| exfairs-I@" not in text  # sweep points stay out of the other tables


def test_hmas_claims_are_judged_for_every_auto_run() -> None:
    phases = [
        {"name": "early", "start_s": 0, "end_s": 10},
        {"name": "mid", "start_s": 10, "end_s": 15},
        {"name": "late", "start_s": 15, "end_s": 20},
    ]
    res = results(("fcfs", "sjf", "wfq"), phases=phases)
    res["vllm-default"] = res["fcfs"]
    scenario = tiny(phases=phases)
    res["auto"] = run(scenario, "auto", selector="rules", period_s=5.0).results
    text = render_markdown({"hmas-drift": res})
    assert "## H-MAS: hmas-drift, per phase" in text and "| late | auto |" in text
    assert "- auto: goodput" in text and "vllm-default — ≥ 1.2×" in text
    assert "within 5 % of the best fixed" in text and "Switches of auto:" in text
    assert "No `auto-llm` row" in text
    res["auto-llm"] = {**res["auto"], "params": {"llm": {"model": "tiny-llama"}}}
    assert "not an LLM's judgement" in render_markdown({"hmas-drift": res})


def test_the_llm_selector_joins_the_hmas_runs_only_with_a_model_server() -> None:
    spec = llm_spec("http://127.0.0.1:1", "m", "vllm_regex")
    jobs = plan(sweep=False, llm=spec)
    with_llm = {n: [p.label for p in ps] for n, ps, _ in jobs if ps[0].label != "fcfs+statera"}
    assert with_llm["hmas-stress"][-1] == with_llm["hmas-drift"][-1] == "auto-llm"
    assert spec.params["llm"] == {"model": "m", "url": "http://127.0.0.1:1",
                                  "constrain": "vllm_regex"}  # fmt: skip
    assert all("auto-llm" not in [p.label for p in ps] for _, ps, _ in plan(sweep=False))
