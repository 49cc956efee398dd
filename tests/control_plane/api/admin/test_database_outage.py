"""A database outage is answered 503 `database_unavailable` with `Retry-After`, on the admin
and the tenant API alike, and counted; before, it was a 500 `internal_error` (a bug, to the
client and to the alert)."""

from __future__ import annotations

import os
from pathlib import Path

from tests.control_plane.api.admin.conftest import AdminApi


def _database_gone(api: AdminApi) -> tuple[Path, Path]:
    """The SQLite file replaced by a directory (new connections cannot open it)."""
    path = Path(str(api.db.engine.url.database))
    aside = path.with_suffix(".aside")
    api.db.engine.dispose()
    os.rename(path, aside)
    path.mkdir()
    return path, aside


async def test_a_database_outage_is_503_and_counted(api: AdminApi) -> None:
    created = await api.client.post("/admin/tenants", json={"name": "acme", "reason": "onboard"})
    assert created.status_code == 201, created.text
    path, aside = _database_gone(api)
    try:
        listed = await api.client.get("/admin/tenants")
        completion = await api.client.post(
            "/v1/completions",
            json={"model": "m", "prompt": "hi"},
            headers={"Authorization": f"Bearer sk-{'u' * 48}"},  # unknown: a SQL lookup
        )
    finally:
        path.rmdir()
        os.rename(aside, path)
    for answer in (listed, completion):
        assert answer.status_code == 503, answer.text
        assert answer.json()["error"]["code"] == "database_unavailable"
        assert answer.headers["Retry-After"] == "5"
    failed = api.app.state.metrics.registry.get_sample_value(
        "arbiter_gateway_failed_total", {"code": "database_unavailable"}
    )
    assert failed == 2.0
    assert (await api.client.get("/admin/tenants")).status_code == 200  # back: nothing stuck
