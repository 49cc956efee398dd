"""Tenants, applications and agents: CRUD, reasons, audit rows, cache and knob side effects."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from sqlalchemy import exc as sa_exc

from control_plane.contracts.knobs import NodeWeights
from tests.control_plane.api.admin.conftest import AdminApi


async def _audit(api: AdminApi, **params: Any) -> list[dict[str, Any]]:
    resp = await api.client.get("/admin/audit", params=params)
    assert resp.status_code == 200
    rows: list[dict[str, Any]] = resp.json()["data"]
    return rows


async def test_tenant_crud_with_audit(api_any_db: AdminApi) -> None:
    api = api_any_db
    body = {
        "name": "acme",
        "weight": 2.5,
        "priority_tier": 1,
        "slo_ttft_ms": 500,
        "queue_cap": 10,
        "rate_limit_rps": 5.0,
        "token_budget": 1000,
        "reason": "onboard",
    }
    created = await api.client.post("/admin/tenants", json=body)
    assert created.status_code == 201, created.text
    tenant = created.json()
    assert (tenant["name"], tenant["weight"], tenant["queue_cap"]) == ("acme", 2.5, 10)
    assert tenant["warnings"] == []

    listed = (await api.client.get("/admin/tenants")).json()["data"]
    assert [t["name"] for t in listed] == ["acme"]

    patched = await api.client.patch(
        "/admin/tenants/acme", json={"weight": 4, "queue_cap": None, "reason": "bigger share"}
    )
    assert patched.status_code == 200, patched.text
    assert (patched.json()["weight"], patched.json()["queue_cap"]) == (4.0, None)

    got = (await api.client.get("/admin/tenants/acme")).json()
    assert got["weight"] == 4.0 and got["slo_ttft_ms"] == 500

    rows = await _audit(api, target="tenant:acme")
    assert [r["action"] for r in rows] == ["tenant.update", "tenant.create"]
    update = rows[0]
    assert update["actor"] == "ops@test"
    assert update["old"] == {"weight": 2.5, "queue_cap": 10}
    assert update["new"] == {"weight": 4.0, "queue_cap": None}
    assert update["reason"] == "bigger share"

    deleted = await api.client.delete("/admin/tenants/acme", params={"reason": "offboard"})
    assert deleted.status_code == 200 and deleted.json()["deleted"] is True
    assert (await api.client.get("/admin/tenants/acme")).status_code == 404
    assert (await _audit(api, target="tenant:acme"))[0]["action"] == "tenant.delete"


async def test_apps_and_agents_and_hierarchy(api_any_db: AdminApi) -> None:
    api = api_any_db
    await api.client.post("/admin/tenants", json={"name": "acme", "reason": "r"})
    app = await api.client.post(
        "/admin/tenants/acme/apps", json={"name": "chat", "weight": 3, "reason": "r"}
    )
    assert app.status_code == 201, app.text
    agent = await api.client.post(
        "/admin/tenants/acme/apps/chat/agents",
        json={"name": "planner", "priority_tier": 2, "slo_e2e_ms": 9000, "reason": "r"},
    )
    assert agent.status_code == 201, agent.text
    assert agent.json()["priority_tier"] == 2

    tree = (await api.client.get("/admin/hierarchy")).json()["data"]
    assert tree[0]["tenant"]["name"] == "acme"
    assert tree[0]["apps"][0]["app"]["weight"] == 3.0
    assert tree[0]["apps"][0]["agents"][0]["name"] == "planner"

    resp = await api.client.patch(
        "/admin/tenants/acme/apps/chat/agents/planner", json={"weight": 0.5, "reason": "r"}
    )
    assert resp.json()["weight"] == 0.5
    agents = (await api.client.get("/admin/tenants/acme/apps/chat/agents")).json()["data"]
    assert [(a["name"], a["weight"]) for a in agents] == [("planner", 0.5)]

    resp = await api.client.delete("/admin/tenants/acme/apps/chat", params={"reason": "r"})
    assert resp.status_code == 200
    assert (await api.client.get("/admin/tenants/acme/apps")).json()["data"] == []
    assert (await api.client.get("/admin/tenants/acme/apps/chat/agents/planner")).status_code == 404


async def test_changes_need_a_reason(api: AdminApi) -> None:
    missing = await api.client.post("/admin/tenants", json={"name": "acme"})
    assert missing.status_code == 422
    assert missing.json()["error"]["param"] == "reason"
    blank = await api.client.post("/admin/tenants", json={"name": "acme", "reason": "   "})
    assert blank.status_code == 422 and blank.json()["error"]["param"] == "reason"
    await api.client.post("/admin/tenants", json={"name": "acme", "reason": "r"})
    no_reason = await api.client.delete("/admin/tenants/acme")
    assert no_reason.status_code == 422
    assert no_reason.json()["error"]["param"] == "reason"
    assert (await api.client.get("/admin/tenants/acme")).status_code == 200
    assert [r["action"] for r in await _audit(api)] == ["tenant.create"]


async def test_bad_values_name_the_field(api: AdminApi) -> None:
    cases = [
        ({"name": "acme", "weight": 0, "reason": "r"}, "weight"),
        ({"name": "acme", "weight": -1, "reason": "r"}, "weight"),
        ({"name": "a/b", "reason": "r"}, "name"),
        ({"name": "acme", "queue_cap": -3, "reason": "r"}, "queue_cap"),
        ({"name": "acme", "slo_ttft_ms": 0, "reason": "r"}, "slo_ttft_ms"),
        ({"name": "acme", "colour": "red", "reason": "r"}, "colour"),
    ]
    for body, param in cases:
        resp = await api.client.post("/admin/tenants", json=body)
        assert resp.status_code == 422, body
        assert resp.json()["error"]["param"] == param, resp.json()
    await api.client.post("/admin/tenants", json={"name": "acme", "reason": "r"})
    dup = await api.client.post("/admin/tenants", json={"name": "acme", "reason": "r"})
    assert dup.status_code == 409
    assert (
        await api.client.patch("/admin/tenants/ghost", json={"weight": 2, "reason": "r"})
    ).status_code == 404
    empty = await api.client.patch("/admin/tenants/acme", json={"reason": "r"})
    assert empty.status_code == 422


async def test_weight_change_reaches_the_scheduler_knob(api: AdminApi) -> None:
    version_before = await api.stores.knobs.version()
    await api.client.post("/admin/tenants", json={"name": "acme", "reason": "r"})
    await api.client.post("/admin/tenants/acme/apps", json={"name": "chat", "reason": "r"})
    resp = await api.client.put("/admin/weights/acme", json={"weight": 3, "reason": "vip"})
    assert resp.status_code == 200, resp.text
    resp = await api.client.put("/admin/weights/acme/chat", json={"weight": 0.5, "reason": "r"})
    assert resp.status_code == 200
    assert await api.stores.knobs.get("weights") == NodeWeights(
        {("acme",): 3.0, ("acme", "chat"): 0.5}
    )
    assert await api.stores.knobs.get("directory") is not None
    assert await api.stores.knobs.version() > version_before
    assert (await api.client.get("/admin/tenants/acme/apps/chat")).json()["weight"] == 0.5

    await api.client.delete("/admin/tenants/acme", params={"reason": "gone"})
    assert await api.stores.knobs.get("weights") == NodeWeights({})
    bad = await api.client.put("/admin/weights/a/b/c/d", json={"weight": 1, "reason": "r"})
    assert bad.status_code == 422
    for weight in (1e-306, 2e6):  # a tiny weight made a counter infinite, and every takeover fail
        await api.client.post("/admin/tenants", json={"name": "tiny", "reason": "r"})
        bad = await api.client.put("/admin/weights/tiny", json={"weight": weight, "reason": "r"})
        assert bad.status_code == 422 and "weight" in bad.text


async def test_a_weight_decided_on_a_stale_read_is_refused(api: AdminApi) -> None:
    """`expected` (the weight as read) makes a weight change a compare-and-set: another
    operator's change since that read wins with a 409, no audit row, the knob untouched."""
    await api.client.post("/admin/tenants", json={"name": "acme", "reason": "r"})
    seen = (await api.client.get("/admin/tenants/acme")).json()["weight"]
    other = {"weight": 2.0, "reason": "someone else"}
    assert (await api.client.put("/admin/weights/acme", json=other)).status_code == 200
    mine = {"weight": 5.0, "reason": "mine", "expected": seen}
    stale = await api.client.put("/admin/weights/acme", json=mine)
    assert stale.status_code == 409, stale.text
    error = stale.json()["error"]
    assert error["code"] == "node_changed" and "weight is 2.0 now" in error["message"]
    assert (await api.client.get("/admin/tenants/acme")).json()["weight"] == 2.0
    assert await api.stores.knobs.get("weights") == NodeWeights({("acme",): 2.0})
    audit = (await api.client.get("/admin/audit", params={"action": "tenant.update"})).json()
    assert [a["reason"] for a in audit["data"]] == ["someone else"]

    retried = await api.client.put("/admin/weights/acme", json={**mine, "expected": 2.0})
    assert retried.status_code == 200 and retried.json()["weight"] == 5.0
    bad = await api.client.put("/admin/weights/acme", json={**mine, "expected": 0})
    assert bad.status_code == 422 and bad.json()["error"]["param"] == "expected"
    ghost = await api.client.put("/admin/weights/ghost", json=mine)
    assert ghost.status_code == 404


async def test_a_chunked_admin_body_over_the_limit_is_a_413(api: AdminApi) -> None:
    """Without a Content-Length the body is counted as it comes; FastAPI's body parsing turned
    the limit's exception into a 400 "error parsing the body" on the admin routes."""
    big = b'{"name": "acme", "reason": "' + b"x" * 1_100_000 + b'"}'

    async def chunked() -> AsyncIterator[bytes]:
        for i in range(0, len(big), 64_000):
            yield big[i : i + 64_000]

    resp = await api.client.post(
        "/admin/tenants", content=chunked(), headers={"Content-Type": "application/json"}
    )
    assert resp.status_code == 413, resp.text
    assert resp.json()["error"]["code"] == "request_too_large"
    assert (await api.client.get("/admin/tenants")).json()["data"] == []


async def test_weight_changes_at_once_keep_each_other(api: AdminApi) -> None:
    """Each change reads the `weights` knob, sets its node and writes it back; done at once,
    the last write used to put back the others' old values (or drop them)."""
    names = [f"t{i}" for i in range(12)]
    for name in names:
        await api.client.post("/admin/tenants", json={"name": name, "reason": "r"})
    changes = [
        api.client.put(f"/admin/weights/{name}", json={"weight": 2.0 + i, "reason": "r"})
        for i, name in enumerate(names)
    ]
    assert {r.status_code for r in await asyncio.gather(*changes)} == {200}
    knob = await api.stores.knobs.get("weights")
    assert knob == NodeWeights({(name,): 2.0 + i for i, name in enumerate(names)})


async def test_weights_committed_a_then_b_but_published_b_then_a_end_on_b(api: AdminApi) -> None:
    """Each change tells the scheduler after its SQL commit, outside any lock: when the first
    change's knob write was overtaken by a second change, the knob used to end on the first
    weight while SQL held the second. Now a publication writes what SQL holds and reads SQL
    again after writing."""
    await api.client.post("/admin/tenants", json={"name": "acme", "reason": "r"})
    knobs = api.stores.knobs
    update = knobs.update
    held, release = asyncio.Event(), asyncio.Event()
    calls = 0

    async def overtaken(*args: Any, **kwargs: Any) -> int:
        nonlocal calls
        calls += 1
        if calls == 1:  # the first change's write waits until the second change is done
            held.set()
            await release.wait()
        return await update(*args, **kwargs)

    knobs.update = overtaken  # type: ignore[method-assign]
    first = asyncio.create_task(
        api.client.put("/admin/weights/acme", json={"weight": 2.0, "reason": "first"})
    )
    await asyncio.wait_for(held.wait(), 10)
    second = await api.client.put("/admin/weights/acme", json={"weight": 7.0, "reason": "second"})
    assert second.status_code == 200
    release.set()
    assert (await first).status_code == 200
    assert (await api.client.get("/admin/tenants/acme")).json()["weight"] == 7.0
    assert await knobs.get("weights") == NodeWeights({("acme",): 7.0})


async def test_a_committed_weight_whose_re_read_fails_is_a_warning_not_an_error(
    api: AdminApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The publication re-reads the committed weight; a database failing just then must not
    turn the committed change into a 500 (a retried delete would then be a 404)."""
    await api.client.post("/admin/tenants", json={"name": "acme", "reason": "r"})

    @contextlib.contextmanager
    def gone() -> Iterator[Any]:  # the change itself writes through `repos`, not `reader`
        raise sa_exc.OperationalError("SELECT …", {}, Exception("the database went away"))
        yield

    monkeypatch.setattr(api.db, "reader", gone)  # below `weight_of`: its own handling runs
    resp = await api.client.put("/admin/weights/acme", json={"weight": 3.0, "reason": "r"})
    assert resp.status_code == 200, resp.text
    assert resp.json()["weight"] == 3.0
    (warning,) = resp.json()["warnings"]
    assert "database re-read failed" in warning and "went away" in warning
    monkeypatch.undo()
    assert (await api.client.get("/admin/tenants/acme")).json()["weight"] == 3.0
