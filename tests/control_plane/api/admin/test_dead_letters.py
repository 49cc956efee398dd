"""`GET /admin/dead-letters`: newest first, bounded pages, counts; admin only."""

from __future__ import annotations

import httpx

from tests.control_plane.api.admin.conftest import AdminApi


async def _fill(api: AdminApi, n: int) -> list[str]:
    return [
        await api.stores.dead_letters.add(
            consumer="recorder",
            kind="write",
            reason=f"OverflowError: row {i}",
            source="events",
            entry_id=f"9-{i}",
            fields={"id": f"r{i}", "tier": 2**63},
        )
        for i in range(n)
    ]


async def test_lists_newest_first_in_bounded_pages(api: AdminApi) -> None:
    ids = await _fill(api, 5)
    first = (await api.client.get("/admin/dead-letters", params={"limit": 2})).json()
    assert [x["id"] for x in first["data"]] == [ids[4], ids[3]]
    assert first["data"][0] == {
        "id": ids[4],
        "at": first["data"][0]["at"],
        "consumer": "recorder",
        "kind": "write",
        "reason": "OverflowError: row 4",
        "source": "events",
        "entry_id": "9-4",
        "fields": {"id": "r4", "tier": 2**63},
    }
    assert first["counts"] == {"recorder:write": 5}
    rest = await api.client.get(
        "/admin/dead-letters", params={"limit": 10, "before": first["next_before"]}
    )
    assert [x["id"] for x in rest.json()["data"]] == [ids[2], ids[1], ids[0]]
    assert rest.json()["next_before"] is None


async def test_empty_and_bad_parameters(api: AdminApi) -> None:
    empty = (await api.client.get("/admin/dead-letters")).json()
    assert empty == {"data": [], "next_before": None, "counts": {}}
    for params in ({"limit": 0}, {"limit": 501}, {"before": "yesterday"}):
        bad = await api.client.get("/admin/dead-letters", params=params)
        assert bad.status_code == 422, params
        assert set(bad.json()["error"]) >= {"message", "type", "param", "code"}


async def test_needs_the_admin_token(api: AdminApi) -> None:
    transport = httpx.ASGITransport(app=api.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://arbiter.test") as anon:
        assert (await anon.get("/admin/dead-letters")).status_code == 401
