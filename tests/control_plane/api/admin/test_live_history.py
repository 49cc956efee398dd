"""`/admin/live/history`: the rolling Redis history up to an hour, SQL minute rollups beyond."""

from __future__ import annotations

import math
import time

import pytest

from control_plane.scheduler.history import HistoryTap
from control_plane.scheduler.views import live_view
from control_plane.state import HistoryPoint
from storage.rollup_stats import NodeStats, RollupKey
from tests.control_plane.api.admin.conftest import AdminApi
from tests.control_plane.api.admin.live_state import publish_live_state


async def _publish(api: AdminApi, times: list[float]) -> None:
    for i, t in enumerate(times):
        points = [
            HistoryPoint("alpha", service=10.0 * i, service_rate=2.0, demand_rate=3.0),
            HistoryPoint("alpha/chat", service=10.0 * i, queued=1, wait_p95_s=0.5),
            HistoryPoint("beta", service=4.0 * i, counter=float(i)),
            HistoryPoint("beta/search", service=4.0 * i),
        ]
        await api.stores.live_history.append(points, t)


async def test_short_ranges_come_from_the_redis_history(api: AdminApi) -> None:
    now = time.time()
    await _publish(api, [now - 600 + 5 * i for i in range(120)])  # the last 10 minutes
    data = (await api.client.get("/admin/live/history", params={"range_s": 300})).json()
    assert data["source"] == "redis" and data["level"] == "tenant"
    assert "counter" in data["fields"] and "wait_p95_s" in data["fields"]
    assert {p["key"] for p in data["points"]} == {"alpha", "beta"}
    times = sorted({p["t"] for p in data["points"]})
    assert now - 300 <= times[0] and len(times) in (59, 60)  # the edge one, by the clock
    assert data["step_s"] == pytest.approx(5.0)
    last = max(data["points"], key=lambda p: (p["t"], p["key"]))
    assert last["key"] == "beta" and last["counter"] == 119.0 and last["service"] == 476.0

    apps = await api.client.get(
        "/admin/live/history", params={"range_s": 900, "level": "app", "tenant": "alpha"}
    )
    points = apps.json()["points"]
    assert {p["key"] for p in points} == {"alpha/chat"} and len(points) == 120
    assert points[0]["queued"] == 1 and points[0]["wait_p95_s"] == 0.5


async def test_a_long_history_is_thinned_to_at_most_300_points(api: AdminApi) -> None:
    now = time.time()
    await _publish(api, [now - 3500 + 5 * i for i in range(700)])
    data = (await api.client.get("/admin/live/history", params={"range_s": 3600})).json()
    alpha = [p for p in data["points"] if p["key"] == "alpha"]
    assert len(alpha) == 234 and data["step_s"] == pytest.approx(15.0)  # every 3rd of 700
    assert alpha[-1]["service"] == 6990.0  # the newest sample is always kept


async def test_the_leader_tap_records_the_live_view(api: AdminApi) -> None:
    now = time.time()
    facts = await publish_live_state(api.stores, now)
    live = live_view(facts.core, "leader-test", now)
    assert await HistoryTap().record(api.stores.live_history, live, facts.core.ctx.ledger)
    data = (await api.client.get("/admin/live/history", params={"range_s": 60})).json()
    by_key = {p["key"]: p for p in data["points"]}
    ledger = facts.core.ctx.ledger
    assert set(by_key) == {"alpha", "beta"}
    assert by_key["alpha"]["service"] == pytest.approx(ledger.service(("alpha",)))
    assert by_key["beta"]["queued"] == facts.queued[("beta",)]
    assert by_key["alpha"]["slo_attainment_1m"] == pytest.approx(0.75)


async def test_long_ranges_come_from_the_minute_rollups(api: AdminApi) -> None:
    now = time.time()
    minute = math.floor(now / 60) * 60
    rows = {}
    for ago in (300, 200, 10):  # minutes before now
        bucket = minute - 60 * ago
        for agent, service in (("planner", 600.0), ("coder", 1200.0)):
            key = RollupKey("agent", 60, bucket, "alpha", "chat", agent)
            rows[key] = NodeStats(
                requests=3, ok=2, failed=1, violations=1, n_in=30, n_out=60,
                unified_service=service,
            )  # fmt: skip
        rows[RollupKey("tenant", 60, bucket, "alpha", "", "")] = NodeStats(
            requests=6, ok=4, failed=2, violations=3, n_in=60, n_out=120, unified_service=1800.0
        )
    old = RollupKey("tenant", 60, minute - 60 * 400, "alpha", "", "")  # outside 6 h
    rows[old] = NodeStats(requests=1, unified_service=99.0)
    with api.db.repos() as r:
        r.rollups.add_many(rows)
    data = (await api.client.get("/admin/live/history", params={"range_s": 21_600})).json()
    assert data["source"] == "rollups" and data["step_s"] == 120.0  # 360 minutes → 180 points
    assert set(data["fields"]) == {
        "service", "service_rate", "tokens_rate", "requests", "slo_attainment",
    }  # fmt: skip
    alpha = [p for p in data["points"] if p["key"] == "alpha"]
    assert len(alpha) == 180 and sum(p["requests"] for p in alpha) == 18
    busy = [p for p in alpha if p["requests"]]
    assert [p["service_rate"] for p in busy] == [15.0] * 3  # 1800 UT over 120 s
    assert [p["service"] for p in busy] == [1800.0, 3600.0, 5400.0]  # accumulated over the range
    assert busy[0]["tokens_rate"] == 1.5 and busy[0]["slo_attainment"] == 0.5
    assert alpha[-1]["service"] == 5400.0 and alpha[0]["slo_attainment"] is None

    agents = await api.client.get(
        "/admin/live/history",
        params={"range_s": 86_400, "level": "agent", "tenant": "alpha", "app": "chat"},
    )
    points = agents.json()["points"]
    assert {p["key"] for p in points} == {"alpha/chat/planner", "alpha/chat/coder"}
    assert len(points) == 2 * 288 and agents.json()["step_s"] == 300.0
    coder = [p for p in points if p["key"] == "alpha/chat/coder"]
    assert coder[-1]["service"] == 3600.0


@pytest.mark.parametrize("range_s", ["30", "86401", "soon"])
async def test_out_of_bounds_ranges_are_422_naming_range_s(api: AdminApi, range_s: str) -> None:
    resp = await api.client.get("/admin/live/history", params={"range_s": range_s})
    assert resp.status_code == 422
    assert "range_s" in resp.text


async def test_an_empty_history_is_an_empty_series(api: AdminApi) -> None:
    data = (await api.client.get("/admin/live/history", params={"range_s": 900})).json()
    assert data["points"] == [] and data["step_s"] == 0.0
