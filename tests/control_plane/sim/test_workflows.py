"""Workflows in scenarios: templates validated, instances drawn deterministically, run as
closed loops (a call exists only once its upstream has ended), measured per program."""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Any

import pytest
from pydantic import ValidationError

from control_plane.sim.scenario import Scenario, load_scenario, parse_scenario
from control_plane.sim.workflow_draw import expand
from control_plane.sim.workflow_spec import WorkflowTemplate
from control_plane.sim.workload import build_workload
from tests.control_plane.sim.builders import run, scenario_dict

LENGTHS = {"prompt": {"dist": "uniform", "low": 50, "high": 100}}


def workflow_scenario(steps: list[dict[str, Any]], **template: Any) -> Scenario:
    agents = ["router", "math", "humanities", "qa"]
    data = scenario_dict(
        workload=[],
        tenants=[{"name": "a", "apps": [{"name": "app", "agents": [{"name": n} for n in agents]}]}],
        classes={
            "short": {**LENGTHS, "output": {"dist": "fixed", "value": 8}},
            "long": {**LENGTHS, "output": {"dist": "fixed", "value": 64}},
        },
        workflows=[
            {
                "name": "wf",
                "tenant": "a",
                "app": "app",
                "entry": "router",
                "agents": {
                    "router": {"class": "short"},
                    "math": {"class": "long", "think_s": 0.5, "include_upstream": True},
                    "humanities": {"class": "long"},
                    "qa": {"class": "short"},
                },
                "steps": steps,
                "arrival": {"process": "poisson", "rate": 2},
                **template,
            }
        ],
    )
    return parse_scenario(data)


BRANCH = [
    {"from": "router", "to": [{"agent": "math", "p": 0.6}, {"agent": "humanities", "p": 0.4}]}
]


def template(s: Scenario) -> WorkflowTemplate:
    return s.workflows[0]


def test_a_loop_without_max_times_is_refused() -> None:
    loop = [
        {"from": "math", "to": [{"agent": "qa"}]},
        {"from": "qa", "to": [{"agent": "math", "p": 0.5}]},
        {"from": "router", "to": [{"agent": "math"}]},
    ]
    with pytest.raises((ValidationError, ValueError), match="needs `max_times`"):
        workflow_scenario(loop)


def test_branch_probabilities_above_one_and_unknown_agents_are_refused() -> None:
    with pytest.raises((ValidationError, ValueError), match="sum above 1"):
        workflow_scenario(
            [{"from": "router", "to": [{"agent": "math", "p": 0.7}, {"agent": "qa", "p": 0.7}]}]
        )
    with pytest.raises((ValidationError, ValueError), match="unknown agents"):
        workflow_scenario([{"from": "router", "to": [{"agent": "nobody"}]}])


def test_expansion_shapes() -> None:
    s = workflow_scenario(
        [
            {
                "from": "router",
                "mode": "sequence",
                "to": [{"agent": "math"}, {"agent": "humanities"}],
            },
            {"from": "math", "to": [{"agent": "qa"}]},
            {"from": "qa", "to": [{"agent": "math", "p": 1.0}], "max_times": 2},
        ]
    )
    nodes = expand(template(s), random.Random(0))
    agents = [(n.agent, n.upstream, n.after) for n in nodes]
    # sequence: humanities waits for math's end but was called by the router
    assert agents[:3] == [("router", None, None), ("math", 0, 0), ("humanities", 0, 1)]
    assert [a for a, _, _ in agents].count("math") == 3  # 1 + 2 loop rounds (max_times)


def test_branch_frequencies_follow_the_probabilities() -> None:
    t = template(workflow_scenario(BRANCH))
    picks = defaultdict(int)
    for k in range(4000):
        for node in expand(t, random.Random(k))[1:]:
            picks[node.agent] += 1
    assert picks["math"] / 4000 == pytest.approx(0.6, abs=0.03)
    assert picks["humanities"] / 4000 == pytest.approx(0.4, abs=0.03)


def test_the_draw_is_deterministic_and_includes_upstream_output() -> None:
    s = workflow_scenario(BRANCH)
    first, again = build_workload(s), build_workload(s)
    assert first == again
    by_id = {spec.id: spec for spec in first}
    for spec in first:
        if spec.agent == "math":
            assert spec.after is not None and spec.upstream == "router"
            assert spec.n_in >= 50 + by_id[spec.after].n_out


def test_calls_run_as_a_closed_loop_and_programs_are_measured() -> None:
    s = workflow_scenario(BRANCH)
    result = run(s, "fcfs")
    by_wf = defaultdict(list)
    for r in result.records:
        by_wf[r.workflow].append(r)
    for calls in by_wf.values():
        router = next(r for r in calls if r.agent == "router")
        for r in calls:
            if r.agent == "math":
                assert r.arrival == pytest.approx(router.finished + 0.5)  # think time
            if r.agent == "humanities":
                assert r.arrival == pytest.approx(router.finished)
    metrics = result.results["workflows"]["a/app"]
    assert metrics["completed"] == metrics["workflows"] == len(by_wf)
    assert metrics["calls_per_workflow"] == 2.0
    assert 0 < metrics["token_latency_s"]["mean"] <= metrics["token_latency_s"]["p99"]


def test_a_failed_upstream_issues_nothing() -> None:
    s = workflow_scenario(BRANCH, arrival={"process": "poisson", "rate": 20})
    data = s.model_dump(by_alias=True)
    data["cluster"] = [{"profile": "llama3-8b-a100", "max_num_seqs": 1}]
    data["tenants"][0]["queue_cap"] = 2  # one call at a time: most routers are turned away
    result = run(parse_scenario(data), "fcfs")
    failed = {r.workflow for r in result.records if r.agent == "router" and r.status != "ok"}
    assert failed
    assert not [r for r in result.records if r.workflow in failed and r.agent != "router"]
    assert result.results["workflows"]["a/app"]["completed"] < len(
        {r.workflow for r in result.records}
    )


@pytest.mark.parametrize("name", ["kairos-qa", "kairos-rg", "kairos-cg", "kairos-colocated"])
def test_the_shipped_kairos_scenarios_load(name: str) -> None:
    s = load_scenario(name)
    assert s.workflows and all(t.arrival.process == "gamma" for t in s.workflows)


def test_a_call_due_after_the_run_ends_is_recorded_and_its_workflow_incomplete() -> None:
    s = workflow_scenario([{"from": "router", "to": [{"agent": "math"}]}])
    data = s.model_dump(by_alias=True)
    data["workflows"][0]["agents"]["math"]["think_s"] = 500.0  # past duration + drain
    result = run(parse_scenario(data), "fcfs")
    maths = [r for r in result.records if r.agent == "math"]
    assert maths and {r.status for r in maths} == {"withdrawn"}
    assert result.results["workflows"]["a/app"]["completed"] == 0
