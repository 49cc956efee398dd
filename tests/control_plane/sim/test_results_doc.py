"""docs/results.md rendering: tables and computed verdicts from real (short) runs."""

from __future__ import annotations

from typing import Any

from control_plane.sim.results_doc import plan
from control_plane.sim.results_tables import exfairs_claims, headline, render_markdown
from tests.control_plane.sim.builders import run, tiny


def results(policies: tuple[str, ...], **overrides: Any) -> dict[str, Any]:
    scenario = tiny(**overrides)
    return {p: run(scenario, p).results for p in policies}


def test_the_plan_covers_the_issue_s_experiments() -> None:
    jobs = {name: [p.label for p in policies] for name, policies in plan()}
    for n in ("I", "II", "III", "IV", "V", "VI"):
        assert jobs[f"exfairs-{n}"] == ["fcfs", "rr", "vtc", "exfairs"]
    assert jobs["hmas-stress"] == ["fcfs", "edf", "sjf", "two_lane", "wfq"]
    assert jobs["hmfs-multimodal"][:2] == ["vtc", "hmfs"]


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
