"""Live state and per-node views, from state a real scheduler core published in Redis."""

from __future__ import annotations

import time
from typing import Any

import pytest

from storage.records import RequestRecord
from tests.control_plane.api.admin.conftest import AdminApi
from tests.control_plane.api.admin.live_state import publish_live_state


async def test_state_is_503_until_a_leader_publishes(api: AdminApi) -> None:
    resp = await api.client.get("/admin/state")
    assert resp.status_code == 503 and resp.headers["retry-after"] == "1"
    assert resp.json()["error"]["code"] == "no_live_state"
    await publish_live_state(api.stores, time.time())
    state = (await api.client.get("/admin/state")).json()
    assert state["leader"] == "leader-test" and state["policy"]["name"] == "exfairs"
    assert state["tenants"]["alpha"]["inflight"] == 1 and state["tenants"]["beta"]["queued"] == 1
    assert state["workers"][0]["id"] == "w1" and 0 <= state["age_s"] < 60


def _by_key(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n["key"]: n for n in data["nodes"]}


async def test_nodes_at_every_level(api: AdminApi) -> None:
    now = time.time()
    facts = await publish_live_state(api.stores, now)
    data = (await api.client.get("/admin/nodes")).json()
    nodes = _by_key(data)
    assert set(nodes) == {
        "alpha",
        "alpha/chat",
        "alpha/chat/planner",
        "alpha/chat/coder",
        "beta",
        "beta/search",
        "beta/search/default",
    }
    ledger = facts.core.ctx.ledger
    for key, node in nodes.items():
        path = tuple(key.split("/"))
        assert node["level"] == ("tenant", "app", "agent")[len(path) - 1]
        assert node["counter"] == pytest.approx(ledger.counter(path))
        assert node["service"] == pytest.approx(ledger.service(path))
        assert (node["queued"], node["inflight"]) == (
            facts.queued.get(path, 0),
            facts.inflight.get(path, 0),
        ), key
    # service: prompt (50 tokens) of every dispatched request + 2 per output token
    assert nodes["alpha"]["service"] == pytest.approx(50 * 5 + 2 * (100 + 120 + 300 + 80 + 10))
    assert nodes["beta"]["service"] == pytest.approx(50 * 3 + 2 * (40 + 60 + 10))
    # SAFI = 0.7 · violation rate + 0.3 · service / max service (ExFairS defaults)
    alpha, beta = nodes["alpha"], nodes["beta"]
    assert (alpha["safi_slo"], beta["safi_slo"]) == (0.25, 1.0)
    assert alpha["safi_usage"] == 1.0
    assert beta["safi_usage"] == pytest.approx(370 / 1470)
    assert alpha["safi"] == pytest.approx(0.7 * 0.25 + 0.3)
    assert beta["safi"] == pytest.approx(0.7 + 0.3 * 370 / 1470)
    assert (alpha["slo_attainment_1m"], beta["slo_attainment_1m"]) == (0.75, 0.0)
    # the credit round moved resource to the worse-off tenant, paid in credit
    assert beta["resource"] > 0 and alpha["resource"] == -beta["resource"]
    assert alpha["credit"] == -beta["credit"] == beta["resource"]
    assert alpha["weight"] == 1.0  # no SQL record, no knob: the default
    assert (data["alpha"], data["beta"], data["leader"]) == (0.7, 0.1, "leader-test")
    assert data["jain"]["tenant"]["nodes"] == 2


async def test_node_filters_weights_and_last_hour(api: AdminApi) -> None:
    now = time.time()
    await publish_live_state(api.stores, now)
    await api.client.post("/admin/tenants", json={"name": "alpha", "weight": 2, "reason": "r"})
    rows = [
        RequestRecord(
            id=f"h{i}",
            tenant="alpha",
            app="chat",
            agent="planner",
            arrival=now - 600 - i,
            status="ok",
            n_in=10,
            n_out=5,
            unified_cost=20.0,
            slo_violated=i == 0,
            e2e_ms=100.0,
        )
        for i in range(4)
    ]
    with api.db.repos() as r:
        r.requests.insert_many(rows)
    data = (
        await api.client.get("/admin/nodes", params={"tenant": "alpha", "level": "agent"})
    ).json()
    assert [n["key"] for n in data["nodes"]] == ["alpha/chat/coder", "alpha/chat/planner"]
    planner = _by_key(data)["alpha/chat/planner"]
    assert (planner["finished_1h"], planner["violations_1h"], planner["slo_attainment_1h"]) == (
        4,
        1,
        0.75,
    )
    tenants = (await api.client.get("/admin/nodes", params={"level": "tenant"})).json()
    assert _by_key(tenants)["alpha"]["weight"] == 2.0
    await api.client.put("/admin/weights/alpha", json={"weight": 5, "reason": "r"})
    tenants = (await api.client.get("/admin/nodes", params={"level": "tenant"})).json()
    assert _by_key(tenants)["alpha"]["weight"] == 5.0


async def test_nodes_without_a_leader_still_answer_from_sql(api: AdminApi) -> None:
    await api.client.post("/admin/tenants", json={"name": "solo", "reason": "r"})
    data = (await api.client.get("/admin/nodes")).json()
    assert data["leader"] is None and data["age_s"] is None
    [node] = data["nodes"]
    assert (node["key"], node["service"], node["safi"], node["slo_attainment_1h"]) == (
        "solo",
        0.0,
        0.0,
        None,
    )


async def test_nodes_carry_demand_status_and_totals_of_the_same_snapshot(api: AdminApi) -> None:
    now = time.time()
    facts = await publish_live_state(api.stores, now)
    data = (await api.client.get("/admin/nodes")).json()
    nodes = _by_key(data)
    # demand: every arrival's prompt (50) + 2 × its expected output (the length predictor's
    # estimate, at most the max_tokens cap of 400), over the 60 s window
    assert 6 * 50 / 60 < nodes["alpha"]["demand_rate"] <= 6 * (50 + 800) / 60
    assert 4 * 50 / 60 < nodes["beta"]["demand_rate"] <= 4 * (50 + 800) / 60
    ledger = facts.core.ctx.ledger
    assert nodes["beta"]["service_rate"] == pytest.approx(
        ledger.window(("beta",), now).service / 60
    )
    tenants = [nodes["alpha"], nodes["beta"]]
    assert sum(n["received_share"] for n in tenants) == pytest.approx(1.0)
    assert sum(n["entitled_rate"] for n in tenants) == pytest.approx(
        sum(n["service_rate"] for n in tenants)
    )
    assert {n["status"] for n in nodes.values()} <= {"ok", "starved", "over-served"}
    assert nodes["alpha/chat/planner"]["wait_p95_s"] is not None
    assert nodes["beta"]["queued"] == 1 and nodes["beta"]["oldest_wait_s"] >= 0.0
    totals = data["totals"]
    assert (totals["queued"], totals["inflight"]) == (2, 2)
    assert totals["queued"] == sum(n["queued"] for n in tenants)
    assert totals["inflight"] == sum(n["inflight"] for n in tenants)
    assert totals["demand_rate"] == pytest.approx(sum(n["demand_rate"] for n in tenants))
    assert totals["slots"] == 64 and "starved" in data["status_rule"]
    state = (await api.client.get("/admin/state")).json()
    assert (state["queue_depth"], state["inflight"]) == (totals["queued"], totals["inflight"])
