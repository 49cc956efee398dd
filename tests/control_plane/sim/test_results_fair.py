"""The "Fair and fast" subsection: the contended window, the claims, its place in the plan."""

from __future__ import annotations

from typing import Any

import pytest

from control_plane.core.job import Slo
from control_plane.sim.records import RequestRecord
from control_plane.sim.results_doc import kairos_plan
from control_plane.sim.results_fair import (
    CHAT_TENANT,
    FAIR_SCENARIO,
    WORKFLOW_APP,
    contended,
    fair_claims,
)
from control_plane.sim.results_kairos import kairos_section
from control_plane.sim.scenario import load_scenario


def record(
    tenant: str, arrival: float, dispatched: float, finished: float, n_out: int
) -> RequestRecord:
    return RequestRecord(
        id=f"{tenant}-{arrival}-{dispatched}",
        tenant=tenant,
        app="app",
        agent="agent",
        model="m",
        cls=None,
        arrival=arrival,
        n_in=1,
        max_tokens=n_out,
        slo=Slo(),
        status="ok",
        dispatched=dispatched,
        first_token=dispatched,
        finished=finished,
        n_out=n_out,
    )


def test_service_is_counted_only_while_every_tenant_has_a_request_waiting() -> None:
    records = [
        record("a", 0.0, 10.0, 11.0, 1),  # a waits over [0, 10)
        record("b", 5.0, 12.0, 13.0, 1),  # b waits over [5, 12): both over [5, 10)
        record("a", 0.0, 0.0, 20.0, 20),  # a streams 20 tokens (40 units) over [0, 20]
        record("b", 0.0, 0.0, 20.0, 60),  # b streams 60 tokens (120 units)
    ]
    out = contended(records, ["a", "b"], 20.0)
    # sampled each second: both waiting at 5, 6, …, 9 — four whole bins
    assert out["seconds"] == 4.0
    assert out["service"]["a"] == pytest.approx(4 * 2.0)
    assert out["service"]["b"] == pytest.approx(4 * 6.0)
    assert contended(records, ["a"], 20.0)["seconds"] == 9.0  # waiting at 0, …, 9


def run_result(chat: float, other: float, wf_mean: float) -> dict[str, Any]:
    stats = {"mean": wf_mean, "p90": 2 * wf_mean, "p95": None, "p99": None}
    return {
        "contended": {"seconds": 100.0, "service": {CHAT_TENANT: chat, "campus": other}},
        "per_tenant": {CHAT_TENANT: {"weight": 1.0}, "campus": {"weight": 1.0}},
        "workflows": {
            WORKFLOW_APP: {
                "workflows": 10,
                "completed": 10,
                "e2e_s": stats,
                "token_latency_s": {k: v and v / 100 for k, v in stats.items()},
            }
        },
        "queue_mean_s": 1.0,
    }


def test_the_claims_are_judged_from_the_numbers() -> None:
    fair_fast = {"hmfs-kairos": run_result(48, 52, 10.5), "kairos": run_result(30, 70, 10.0)}
    claims = fair_claims(fair_fast)
    assert claims[0].startswith("- fair: PASS") and "-4.0 %" in claims[0]
    assert claims[1].startswith("- fast: PASS") and "+5.0 %" in claims[1]
    unfair_slow = {"hmfs-kairos": run_result(44, 56, 11.5), "kairos": run_result(30, 70, 10.0)}
    claims = fair_claims(unfair_slow)
    assert claims[0].startswith("- fair: FAIL") and claims[1].startswith("- fast: FAIL")
    assert fair_claims({"kairos": run_result(1, 1, 1.0)})[0].startswith("- incomplete")


def test_the_fair_run_is_a_subsection_of_the_kairos_section() -> None:
    runs = {"hmfs-kairos": run_result(48, 52, 10.5), "kairos": run_result(30, 70, 10.0)}
    section = kairos_section({FAIR_SCENARIO: runs})
    assert section.startswith("## Kairos")
    assert "### Fair and fast" in section and "\n## " not in section
    assert f"- {FAIR_SCENARIO}:" not in section  # not among the Kairos-vs-Parrot verdicts
    assert "| hmfs-kairos | 0.48 | 0.5 | -4.0 |" in section


def test_the_plan_runs_the_fair_scenario_and_it_fits_its_claims() -> None:
    (name, policies, rho) = kairos_plan(sweep=False)[-1]
    assert (name, rho) == (FAIR_SCENARIO, None)
    labels = {p.label: (p.name, p.params) for p in policies}
    assert labels["hmfs-kairos"] == ("hmfs", {"depth": 2, "order": "kairos"})
    assert {"hmfs", "kairos", "vtc", "parrot"} <= set(labels)
    scenario = load_scenario(FAIR_SCENARIO)
    tenants = {t.name: t for t in scenario.tenants}
    assert CHAT_TENANT in tenants and WORKFLOW_APP.split("/")[0] in tenants
    assert [w.tenant for w in scenario.workflows] == [WORKFLOW_APP.split("/")[0]]
    assert {s.tenant for s in scenario.workload} == {CHAT_TENANT}
