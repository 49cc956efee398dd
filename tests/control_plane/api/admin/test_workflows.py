"""Workflow graphs and latency distributions from the request rows."""

from __future__ import annotations

import dataclasses
import time

import pytest

from control_plane.contracts.knobs import PluginChoice
from control_plane.core.ledger import Ledger
from control_plane.scheduler.rebuild import build_core
from control_plane.scheduler.views import live_view
from storage.records import RequestRecord
from tests.control_plane.api.admin.conftest import AdminApi
from tests.support.qa_workflows import feed_qa, history_call


def qa_rows(now: float) -> list[RequestRecord]:
    """10 workflows: router, then math (6) or humanities (4); workflow 0 calls both at once."""
    rows, i = [], 0
    for w in range(10):
        t0 = now - 3000 + w * 60
        rows.append(history_call(i, f"wf{w}", "router", None, t0, 1.0))
        i += 1
        targets = ["math", "humanities"] if w == 0 else ["math" if w < 6 else "humanities"]
        for target in targets:
            rows.append(history_call(i, f"wf{w}", target, "router", t0 + 1.0, 2.0 + w / 10))
            i += 1
    return rows


async def test_app_graph_and_distributions(api: AdminApi) -> None:
    now = time.time()
    rows = qa_rows(now)
    rows.append(
        RequestRecord(
            id="other",
            tenant="globex",
            app="rg",
            agent="writer",
            upstream="researcher",
            workflow="x",
            arrival=now - 5,
            status="ok",
        )
    )
    # a call that timed out in the queue never ran: not a call of the graph, as the leader's
    # learned graph has none of them (its 5 s wait would have been a "single" latency)
    late = history_call(99, "wf3", "math", "router", now - 3000 + 3 * 60 + 1.0, 5.0)
    rows.append(dataclasses.replace(late, status="timeout", dispatched_at=None))
    with api.db.repos() as r:
        r.requests.insert_many(rows)

    listed = (await api.client.get("/admin/workflows")).json()
    apps = {(a["tenant"], a["app"]): a for a in listed["data"]}
    assert apps[("acme", "qa")]["workflows"] == 10 and apps[("acme", "qa")]["calls"] == 21
    assert apps[("acme", "qa")]["agents"] == ["humanities", "math", "router"]
    assert ("globex", "rg") in apps

    graph = (await api.client.get("/admin/workflows/qa", params={"tenant": "acme"})).json()
    assert (graph["calls"], graph["workflows"], graph["acyclic"]) == (21, 10, True)
    edges = {(e["source"], e["target"]): e for e in graph["edges"]}
    assert set(edges) == {("(entry)", "router"), ("router", "math"), ("router", "humanities")}
    assert edges[("(entry)", "router")]["count"] == 10
    # over the router's 10 calls (workflow 0 asked both experts): 6 and 5, not 6 and 5 of 11
    assert edges[("router", "math")]["frequency"] == pytest.approx(6 / 10)
    assert edges[("router", "humanities")]["frequency"] == pytest.approx(5 / 10)
    assert edges[("(entry)", "router")]["frequency"] == 1.0
    assert (
        edges[("router", "math")]["parallel"] == 1
        and edges[("router", "humanities")]["parallel"] == 1
    )
    depth = {n["id"]: n["depth"] for n in graph["nodes"]}
    assert depth == {"(entry)": 0, "router": 1, "math": 2, "humanities": 2}

    router = graph["agents"]["router"]
    assert router["single"]["count"] == 10 and router["single"]["mean"] == pytest.approx(1000.0)
    # remaining latency of the router: from its start to the end of its workflow
    ends = [3.0 + w / 10 for w in range(10)]
    assert router["remaining"]["mean"] == pytest.approx(1000 * sum(ends) / 10)
    math_single = graph["agents"]["math"]["single"]
    assert math_single["quantiles"]["p0"] == pytest.approx(2000.0)
    assert sum(math_single["histogram"]["counts"]) == 6


async def test_empty_app(api: AdminApi) -> None:
    graph = (await api.client.get("/admin/workflows/none")).json()
    assert (graph["calls"], graph["nodes"], graph["edges"], graph["agents"]) == (0, [], [], {})


async def test_learned_workflows_come_from_the_leader_s_live_checkpoint(api: AdminApi) -> None:
    """What the orchestrator learned and schedules by: graph, convergence, live priority."""
    resp = await api.client.get("/admin/learned/workflows")
    assert resp.status_code == 503 and resp.json()["error"]["code"] == "no_live_state"
    core = build_core({"policy": PluginChoice("kairos")}, Ledger(), "vtc")
    orch = core.ctx.workflows
    t = feed_qa(orch, 40, 0.0)
    orch.refresh(t)
    await api.stores.checkpoints.save_live(live_view(core, "leader-test", t))
    resp = await api.client.get("/admin/learned/workflows", params={"app": "qa"})
    assert resp.status_code == 200, resp.text
    (qa,) = resp.json()["data"]
    assert (qa["tenant"], qa["workflows"]) == ("acme", 40)
    edges = {(e["from"], e["to"]): e["frequency"] for e in qa["edges"]}
    assert edges[("router", "math")] == pytest.approx(0.6)
    assert edges[("router", "humanities")] == pytest.approx(0.4)
    agents = {a["agent"]: a for a in qa["agents"]}
    assert agents["math"]["converged"] and agents["math"]["stages"] == 0
    assert agents["router"]["stages"] == 1
    # math has the least left of its workflow: served first
    assert agents["math"]["priority"] < agents["humanities"]["priority"]
    assert agents["math"]["single_mode_s"] == pytest.approx(2.0)
    other = await api.client.get("/admin/learned/workflows", params={"tenant": "nobody"})
    assert other.json()["data"] == []


async def test_calls_that_never_ran_do_not_take_the_places_of_calls_that_did(
    api: AdminApi,
) -> None:
    """`limit` counts the calls that ran: a burst of queue timeouts newer than every served
    call leaves the graph as it was, where filtering after the limit left it empty."""
    now = time.time()
    rows = qa_rows(now)
    timeouts = [
        dataclasses.replace(
            history_call(100 + i, f"late{i}", "math", "router", now - 10 + i / 100, 5.0),
            status="timeout",
            dispatched_at=None,
        )
        for i in range(30)
    ]
    with api.db.repos() as r:
        r.requests.insert_many(rows + timeouts)
    params = {"tenant": "acme", "limit": 21}
    graph = (await api.client.get("/admin/workflows/qa", params=params)).json()
    assert (graph["calls"], graph["workflows"]) == (21, 10)
    listed = (await api.client.get("/admin/workflows", params={"limit": 21})).json()
    assert listed["rows"] == 21 and listed["data"][0]["calls"] == 21
