"""Workers: register (SQL + Redis registry), list, drain/undrain visible in Redis, delete."""

from __future__ import annotations

from typing import Any

from control_plane.api.admin.workers import stale_after_s
from control_plane.contracts.workers import WorkerSample
from tests.control_plane.api.admin.conftest import AdminApi
from tests.control_plane.api.admin.served import served
from workers.sim.app import create_app as create_sim_worker
from workers.sim.config import SimConfig


async def _worker(api: AdminApi, worker_id: str) -> dict[str, Any]:
    rows = (await api.client.get("/admin/workers")).json()["data"]
    return next(r for r in rows if r["id"] == worker_id)


async def test_register_drain_undrain_delete(api: AdminApi) -> None:
    body = {
        "url": "http://127.0.0.1:1/",
        "id": "w1",
        "model": "tiny",
        "kind": "sim",
        "max_num_seqs": 8,
        "kv_tokens": 4096,
        "reason": "capacity",
    }
    resp = await api.client.post("/admin/workers", json=body)
    assert resp.status_code == 201, resp.text
    record = await api.stores.workers.get("w1")
    assert record is not None
    assert (record.url, record.status, record.max_num_seqs) == (
        "http://127.0.0.1:1",
        "active",
        8,
    )
    await api.stores.workers.set_metrics(
        "w1",
        WorkerSample(
            True, 0.5, running=3, waiting=1, kv_usage=0.5, preemptions_total=2, kv_tokens=4096
        ),
        now=1.0,
    )
    row = await _worker(api, "w1")
    assert row["in_sql"] and row["in_redis"]
    assert (row["running"], row["waiting"], row["kv_usage"], row["preemptions"]) == (3, 1, 0.5, 2)

    drained = await api.client.post("/admin/workers/w1/drain", json={"reason": "maintenance"})
    assert drained.status_code == 200 and drained.json()["status"] == "draining"
    assert getattr(await api.stores.workers.get("w1"), "status", None) == "draining"
    assert (await _worker(api, "w1"))["status"] == "draining"
    again = await api.client.post("/admin/workers", json=body)  # re-registering keeps the drain
    assert again.json()["status"] == "draining"

    resp = await api.client.post("/admin/workers/w1/undrain", json={"reason": "done"})
    assert resp.json()["status"] == "active"
    assert getattr(await api.stores.workers.get("w1"), "status", None) == "active"

    resp = await api.client.delete("/admin/workers/w1", params={"reason": "retired"})
    assert resp.status_code == 200
    assert await api.stores.workers.get("w1") is None
    assert (await api.client.get("/admin/workers")).json()["data"] == []
    actions = [a["action"] for a in (await api.client.get("/admin/audit")).json()["data"]]
    assert actions == [
        "worker.delete",
        "worker.undrain",
        "worker.register",
        "worker.drain",
        "worker.register",
    ]


async def test_drain_restores_a_worker_redis_lost(api: AdminApi) -> None:
    body = {"url": "http://127.0.0.1:2", "id": "w2", "model": "m", "reason": "r"}
    await api.client.post("/admin/workers", json=body)
    await api.stores.workers.remove("w2")  # e.g. Redis was flushed
    resp = await api.client.post("/admin/workers/w2/drain", json={"reason": "r"})
    assert resp.status_code == 200
    assert getattr(await api.stores.workers.get("w2"), "status", None) == "draining"


async def test_register_probes_the_model_and_refuses_bad_input(api: AdminApi) -> None:
    config = SimConfig(served_model_name="probe-model", speed=100.0)
    with served(create_sim_worker(config), ready_path="/health") as url:
        resp = await api.client.post("/admin/workers", json={"url": url, "reason": "r"})
    assert resp.status_code == 201, resp.text
    worker = resp.json()
    assert worker["model"] == "probe-model" and worker["id"] == url.removeprefix("http://")

    dup = await api.client.post("/admin/workers", json={"url": url, "id": "other", "reason": "r"})
    assert dup.status_code == 409
    bad = await api.client.post("/admin/workers", json={"url": "ftp://x", "reason": "r"})
    assert bad.status_code == 422 and bad.json()["error"]["param"] == "url"
    kind = await api.client.post(
        "/admin/workers", json={"url": "http://h:1", "kind": "gpu", "reason": "r"}
    )
    assert kind.status_code == 422 and kind.json()["error"]["param"] == "kind"
    missing = await api.client.post("/admin/workers/nope/drain", json={"reason": "r"})
    assert missing.status_code == 404
    assert (
        await api.client.delete("/admin/workers/nope", params={"reason": "r"})
    ).status_code == 404


async def test_each_row_says_when_its_scrape_reads_as_stale(api: AdminApi) -> None:
    """The console flagged a scrape older than its own 10 s as stale: with a leader set to
    scrape every 30 s every worker read stale. The API says how old is stale for its
    `scrape_interval_s` (4 intervals, at least 10 s)."""
    body = {"url": "http://127.0.0.1:1/", "id": "w9", "model": "tiny", "reason": "r"}
    assert (await api.client.post("/admin/workers", json=body)).status_code == 201
    (row,) = (await api.client.get("/admin/workers")).json()["data"]
    assert row["stale_after_s"] == 10.0  # the default interval, 0.5 s
    assert (stale_after_s(0.5), stale_after_s(2.5), stale_after_s(30)) == (10.0, 10.0, 120.0)
