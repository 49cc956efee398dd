"""Admin changes are recorded in SQL before they go live in Redis, and kept only if they did
(`control_plane/api/admin/recorded.py`), on the real app, Redis and SQLite."""

from __future__ import annotations

import os
import signal
from typing import Any

import httpx
import pytest
from redis.exceptions import ConnectionError as RedisConnectionError
from sqlalchemy import create_engine, text

from control_plane.api.admin.deps import AdminContext
from control_plane.api.admin.knobs import set_knob
from control_plane.contracts.knobs import PluginChoice
from control_plane.gateway.errors import ApiError
from tests.control_plane.api.admin.conftest import AdminApi
from tests.support.redis_server import RedisServer

WORKER = {"url": "http://127.0.0.1:1", "id": "w1", "model": "tiny", "kind": "sim", "reason": "r"}
ADMISSION = {"value": {"name": "capacity", "params": {"max_concurrency": 4}}, "reason": "r"}


def _break_the_audit_log(url: str) -> None:
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(text("DROP TABLE audit_log"))
    finally:
        engine.dispose()


async def test_a_change_the_database_cannot_record_never_goes_live(api: AdminApi) -> None:
    """Regression: the knob, the worker's status or its removal went live in Redis first, and
    a database error after it left a change in force that the audit log never saw."""
    assert (await api.client.post("/admin/workers", json=WORKER)).status_code == 201
    _break_the_audit_log(api.db.url)
    transport = httpx.ASGITransport(app=api.app, raise_app_exceptions=False)
    async with httpx.AsyncClient(
        transport=transport, base_url=str(api.client.base_url), headers=api.client.headers
    ) as client:  # answers as a served app would: 500 in OpenAI's shape
        knob = await client.put("/admin/knobs/admission", json=ADMISSION)
        drain = await client.post("/admin/workers/w1/drain", json={"reason": "r"})
        delete = await client.delete("/admin/workers/w1", params={"reason": "r"})
        register = await client.post(
            "/admin/workers", json={**WORKER, "id": "w2", "url": "http://127.0.0.1:2"}
        )
        policy = await client.put("/admin/policy", json={"name": "fcfs", "reason": "r"})

    for resp in (knob, drain, delete, register, policy):
        assert resp.status_code >= 500 and "error" in resp.json(), resp.text
    assert await api.stores.knobs.get("admission") is None
    assert await api.stores.knobs.get("policy") is None
    worker = await api.stores.workers.get("w1")
    assert worker is not None and worker.status == "active"
    assert await api.stores.workers.get("w2") is None


async def test_a_change_that_cannot_go_live_leaves_no_audit_row(
    api: AdminApi, redis_server: RedisServer
) -> None:
    assert redis_server.proc is not None
    os.kill(redis_server.proc.pid, signal.SIGSTOP)
    try:
        resp = await api.client.put("/admin/knobs/admission", json=ADMISSION)
    finally:
        os.kill(redis_server.proc.pid, signal.SIGCONT)
    assert resp.status_code == 503, resp.text
    audit = (await api.client.get("/admin/audit", params={"action": "knob.set"})).json()
    assert audit["data"] == []

    assert (await api.client.put("/admin/knobs/admission", json=ADMISSION)).status_code == 200
    assert isinstance(await api.stores.knobs.get("admission"), PluginChoice)
    audit = (await api.client.get("/admin/audit", params={"action": "knob.set"})).json()
    assert [a["target"] for a in audit["data"]] == ["knob:admission"]


async def test_a_change_refused_after_it_was_recorded_leaves_no_audit_row(api: AdminApi) -> None:
    """The row is written first; a refusal when going live (here: the knob changed since the
    value the change was decided on) rolls it back and answers 409."""
    state = api.app.state
    ctx = AdminContext(state.settings, state.db, state.stores, state.directory)
    value = ADMISSION["value"]
    with pytest.raises(ApiError) as refused:
        await set_knob(
            ctx, "admission", value, actor="a", reason="r", action="knob.set", expected="{}"
        )
    assert refused.value.status == 409 and refused.value.code == "knob_changed"
    audit = (await api.client.get("/admin/audit", params={"action": "knob.set"})).json()
    assert audit["data"] == [] and await api.stores.knobs.get("admission") is None


async def test_a_change_whose_reply_was_lost_keeps_its_audit_row(
    api: AdminApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: Redis ran the change, the reply was lost (a reset), and the admin API
    answered 503 and rolled the audit row back — the change was live without its row. The
    change's ticket now says it ran: 200, and the row is kept."""
    scripts = api.stores.knobs._scripts
    call = scripts.call

    async def lost(name: str, keys: Any, args: Any) -> Any:
        await call(name, keys, args)
        raise RedisConnectionError("Connection reset by peer")

    monkeypatch.setattr(scripts, "call", lost)
    resp = await api.client.put("/admin/knobs/admission", json=ADMISSION)
    assert resp.status_code == 200, resp.text
    live = await api.stores.knobs.get("admission")
    assert isinstance(live, PluginChoice) and live.params["max_concurrency"] == 4
    with api.db.reader() as r:
        assert [a.action for a in r.audit.list(target="knob:admission")] == ["knob.set"]
