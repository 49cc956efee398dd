"""The learned view the leader publishes: graph frequencies per source call, latency windows
as quantiles, convergence and the live priority order."""

from __future__ import annotations

import json

import numpy as np
import pytest

from control_plane.core.workflows.orchestrator import Orchestrator
from control_plane.core.workflows.samples import Samples
from control_plane.core.workflows.views import QUANTILES, quantiles
from tests.control_plane.core.workflows.test_orchestrator import call

QUANTILES_01 = np.asarray(QUANTILES) / 100.0


def run_branching(orch: Orchestrator, n: int) -> None:
    """`n` workflows: router (1 s), then math (2 + i % 5 s) on even i, humanities (8 s) on odd
    i; every fourth workflow also asks both experts at once."""
    t = 0.0
    for i in range(n):
        call(orch, f"w{i}", "router", None, t, 1.0)
        if i % 4 == 0:
            call(orch, f"w{i}", "math", "router", t + 1.0, 2.0 + i % 5)
            call(orch, f"w{i}", "humanities", "router", t + 1.0, 8.0)
        elif i % 2 == 0:
            call(orch, f"w{i}", "math", "router", t + 1.0, 2.0 + i % 5)
        else:
            call(orch, f"w{i}", "humanities", "router", t + 1.0, 8.0)
        t += 20.0
        orch.tick(t)
    orch.refresh(t)


def test_quantiles_of_a_window_in_seconds() -> None:
    samples = Samples(window=512)
    assert quantiles(samples) is None and quantiles(None) is None
    for v in range(101):
        samples.add(v / 10)
    q = quantiles(samples)
    assert q is not None and list(q) == [f"p{p}" for p in QUANTILES]
    assert q == {f"p{p}": pytest.approx(p / 10) for p in QUANTILES}


def test_learned_graph_windows_and_priority() -> None:
    orch = Orchestrator(idle_s=5.0)
    run_branching(orch, 40)
    (qa,) = orch.learned()
    assert (qa["tenant"], qa["app"], qa["workflows"]) == ("acme", "qa", 40)
    edges = {(e["from"], e["to"]): e for e in qa["edges"]}
    # 20 even workflows call math (10 of them also humanities), 20 odd call humanities:
    # frequencies are over the router's 40 calls, so they need not add up to 1
    assert edges[("router", "math")]["frequency"] == pytest.approx(20 / 40)
    assert edges[("router", "humanities")]["frequency"] == pytest.approx(30 / 40)
    assert edges[("router", "math")]["parallel"] == 10
    assert edges[("(entry)", "router")]["frequency"] == 1.0
    agents = {a["agent"]: a for a in qa["agents"]}
    assert (agents["router"]["calls"], agents["math"]["calls"]) == (40, 20)
    single = agents["humanities"]["latency_s"]["single"]
    assert single == {f"p{p}": pytest.approx(8.0) for p in QUANTILES}
    math = np.asarray([2.0 + i % 5 for i in range(0, 40, 2)])
    got = agents["math"]["latency_s"]["single"]
    assert [got[f"p{p}"] for p in QUANTILES] == pytest.approx(np.quantile(math, QUANTILES_01))
    # the router waits for its slowest expert: 9 s when humanities ran, else 1 + math
    remaining = agents["router"]["latency_s"]["remaining"]
    assert remaining["p100"] == pytest.approx(9.0) and remaining["p0"] == pytest.approx(3.0)
    order = sorted(qa["agents"], key=lambda a: a["priority"])
    assert [a["priority"] for a in order] == [1, 2, 3]
    assert order[0]["agent"] == "math" and order[-1]["agent"] == "router"
    assert qa["scored_at"] == pytest.approx(800.0)


def test_the_view_is_small_for_a_full_window() -> None:
    """The live checkpoint carries it every second: its size stays bounded (its build time is
    a benchmark's business, not a unit test's)."""
    orch = Orchestrator(window=512, idle_s=5.0)
    run_branching(orch, 1200)
    assert len(json.dumps(orch.learned())) < 4000


def test_agents_not_learned_yet_have_no_windows() -> None:
    orch = Orchestrator(idle_s=5.0)
    call(orch, "w0", "router", None, 0.0, 1.0)
    assert orch.learned() == []
    orch.tick(10.0)
    (qa,) = orch.learned()
    (router,) = qa["agents"]
    assert router["priority"] is None and router["score"] is None and qa["scored_at"] is None
    assert router["latency_s"]["single"] == {f"p{p}": 1.0 for p in QUANTILES}
    assert not router["converged"] and router["samples"] == 1
