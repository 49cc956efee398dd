"""`results.json` keys are a contract: results[policy][metric], results[policy]["per_tenant"]."""

from __future__ import annotations

import json
from pathlib import Path

from control_plane.sim.live_report import live_document
from control_plane.sim.report import render_html, write_report, write_results
from control_plane.sim.runner import results_document
from tests.control_plane.sim.builders import run, tiny

# Frozen on purpose: renaming or dropping a key breaks consumers (docs, console, notebooks).
GROUP = {
    "requests",
    "completed",
    "timeouts",
    "withdrawn",
    "aborted",
    "errors",
    "rejected",
    "slo_violation_rate",
    "ttft_compliance",
    "tpot_compliance",
    "ttft_mean_s",
    "ttft_p50_s",
    "ttft_p90_s",
    "ttft_p99_s",
    "tpot_mean_s",
    "tpot_p50_s",
    "tpot_p90_s",
    "tpot_p99_s",
    "ttft_cv",
    "e2e_mean_s",
    "e2e_p50_s",
    "e2e_p90_s",
    "e2e_p99_s",
    "queue_mean_s",
    "queue_p99_s",
    "tokens_per_s",
    "goodput_rps",
    "esg",
    "esg_per_s",
    "service",
    "demand",
}
RUN = GROUP | {
    "policy",
    "params",
    "mean_safi",
    "jain_safi",
    "jain_service",
    "jain_violations",
    "max_service_gap",
    "service_gap_pair",
    "per_tenant",
    "per_node",
    "per_worker",
    "per_phase",
    "timeseries",
    "cdf",
    "workflows",
}
TENANT = GROUP | {"weight", "service_share", "safi"}
TIMESERIES = {"t", "service", "queued", "tokens_per_s", "safi", "jain_service", "jain_safi"}


def test_simulated_results_have_the_stable_keys(tmp_path: Path) -> None:
    scenario = tiny(phases=[{"name": "first", "start_s": 0, "end_s": 10}])
    doc = results_document(scenario, [run(scenario, "vtc"), run(scenario, "fcfs")])
    data = json.loads(write_results(doc, tmp_path).read_text())
    assert set(data) == {"schema", "scenario", "results"}
    assert data["schema"] == "arbiter.results/1" and data["scenario"]["source"] == "sim"
    for res in data["results"].values():
        extra = {"admission", "placement", "length_prediction", "switches", "selector"}
        assert set(res) == RUN | extra
        assert set(res["length_prediction"]) == {"n", "mae", "under_rate", "mean_out", "mean_cap"}
        assert set(res["per_tenant"]) == {"a", "b"}
        assert all(set(m) == TENANT for m in res["per_tenant"].values())
        assert set(res["per_node"]) == {
            "a/default",
            "a/default/default",
            "b/default",
            "b/default/default",
        }
        assert set(res["per_phase"]["first"]) == GROUP
        assert set(res["timeseries"]) == TIMESERIES
        assert set(res["per_worker"]["llama3-8b-a100-0"]) == {
            "requests",
            "tokens_per_s",
            "busy_fraction",
            "preemptions",
        }
        assert len(res["cdf"]["e2e_s"]) == 101
    html = write_report(data, tmp_path).read_text()
    assert html.count("<script") >= 4 and "Plotly" in html and "Jain" in html


def test_live_results_have_the_same_shape() -> None:
    scenario = tiny()
    sim = run(scenario, "vtc")
    live = live_document(scenario, sim.records, sim.policy, speed=4.0)
    res = live["results"]["vtc"]
    assert live["scenario"]["source"] == "live" and live["scenario"]["speed"] == 4.0
    assert set(res) == RUN
    assert all(set(m) == TENANT for m in res["per_tenant"].values())
    assert res["max_service_gap"] is not None and res["max_service_gap"] >= 0
    assert "<html>" in render_html(live)
