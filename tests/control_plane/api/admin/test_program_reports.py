"""`/admin/reports/programs`: program-level metrics from real request rows equal the simulator's
`workflow_metrics` on the same requests (SQLite and PostgreSQL); preemptions per worker come
from the leader's live view; bad periods are 422 naming the parameter."""

from __future__ import annotations

import time

from tests.control_plane.api.admin.conftest import AdminApi
from tests.control_plane.api.admin.preemption_state import publish_preemptions
from tests.storage.program_rows import (
    SINCE,
    UNTIL,
    assert_same_as_simulator,
    make_workflow_rows,
    simulator_metrics,
)

PATH = "/admin/reports/programs"


async def test_programs_equal_the_simulators_metrics(api_any_db: AdminApi) -> None:
    rows = make_workflow_rows()
    with api_any_db.db.repos() as r:
        r.requests.insert_many(rows)
    resp = await api_any_db.client.get(PATH, params={"from": SINCE, "to": UNTIL})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert (body["start"], body["end"]) == (SINCE, UNTIL)
    assert body["from"] == "2023-11-14T22:13:20Z"
    assert_same_as_simulator(body["data"], simulator_metrics(rows, SINCE, UNTIL))
    assert body["preemptions"] == {"source": "live", "updated_at": None, "leader": None, "data": []}

    only = await api_any_db.client.get(
        PATH, params={"from": SINCE, "to": UNTIL, "tenant": "globex"}
    )
    assert [a["key"] for a in only.json()["data"]] == ["globex/chat"]
    assert only.json()["data"][0] == next(a for a in body["data"] if a["key"] == "globex/chat")


async def test_preemptions_per_worker_from_the_live_view(api: AdminApi) -> None:
    now = time.time()
    await publish_preemptions(api.stores, {"w2": 0, "w1": 7}, now)
    body = (await api.client.get(PATH)).json()
    assert body["data"] == []
    live = body["preemptions"]
    assert (live["leader"], live["updated_at"]) == ("leader-test", now)
    assert live["data"] == [
        {"worker": "w1", "model": "m", "healthy": True, "preemptions": 7},
        {"worker": "w2", "model": "m", "healthy": True, "preemptions": 0},
    ]


async def test_bad_periods_are_refused(api: AdminApi) -> None:
    backwards = await api.client.get(PATH, params={"from": UNTIL, "to": SINCE})
    assert backwards.status_code == 422
    assert backwards.json()["error"]["param"] == "from"
    garbled = await api.client.get(PATH, params={"to": "yesterday"})
    assert garbled.status_code == 422
    assert garbled.json()["error"]["param"] == "to"
    unauthorised = await api.client.get(PATH, headers={"Authorization": "Bearer wrong"})
    assert unauthorised.status_code == 401
    assert "error" in unauthorised.json()
