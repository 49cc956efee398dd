"""The meta-controller live: an operator hands the policy to `auto` through the admin API, the
leader's controller switches under load, every switch becomes an audit row (actor
`controller`, with the rule and the view it decided on), and pinning a policy takes the
choice back."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx

from storage.records import AuditRecord
from tests.support.cluster import Cluster

STREAMS = 12  # per tenant, against 2 slots: a queue that misses every 50 ms TTFT target


async def _load(url: str, keys: dict[str, str], seconds: float) -> int:
    body = {"model": "tiny-llama", "prompt": "q " * 20, "max_tokens": 8, "ignore_eos": True}
    done = 0

    async def stream(key: str, stop_at: float) -> None:
        nonlocal done
        headers = {"Authorization": f"Bearer {key}"}
        while time.monotonic() < stop_at:
            resp = await client.post(f"{url}/v1/completions", json=body, headers=headers)
            assert resp.status_code == 200, resp.text
            done += 1

    stop_at = time.monotonic() + seconds
    async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=100)) as client:
        await asyncio.gather(*(stream(k, stop_at) for k in keys.values() for _ in range(STREAMS)))
    return done


def _controller_rows(cluster: Cluster) -> list[AuditRecord]:
    db = cluster.database()
    try:
        with db.reader() as r:
            rows = r.audit.list(action="policy.switch", limit=100)
    finally:
        db.dispose()
    return sorted((a for a in rows if a.actor == "controller"), key=lambda a: a.at)


def _put_policy(url: str, token: str, name: str, params: dict[str, Any]) -> httpx.Response:
    return httpx.put(
        f"{url}/admin/policy",
        json={"name": name, "params": params, "reason": "e2e: hand over / take back"},
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )


def _policy(url: str, token: str) -> dict[str, Any]:
    resp = httpx.get(f"{url}/admin/policy", headers={"Authorization": f"Bearer {token}"})
    assert resp.status_code == 200, resp.text
    data: dict[str, Any] = resp.json()
    return data


def _running(url: str, token: str) -> str:
    running = _policy(url, token)["running"]
    return str(running["name"]) if running else ""


def test_the_controller_switches_live_and_audits_every_switch(cluster: Cluster) -> None:
    keys = cluster.tenants(["a", "b"])
    cluster.start_worker(speed=1.0, max_num_seqs=2)
    scheduler = cluster.start_scheduler()
    assert scheduler.health_url is not None
    metrics_url = scheduler.health_url.replace("/healthz", "/metrics")
    url = cluster.start_gateway()
    token = cluster.admin_token

    slo = httpx.put(  # a request may only relax targets: the operator sets them
        f"{url}/admin/knobs/slo_defaults",
        json={"value": {"ttft_ms": 50}, "reason": "e2e: a target every request misses"},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert slo.status_code == 200, slo.text
    bad = _put_policy(url, token, "auto", {"pool": ["fcfs", "nope"]})
    assert bad.status_code == 422 and "params.pool" in bad.text
    params = {"period_s": 2.0, "pool": ["fcfs", "edf", "sjf"], "initial": "fcfs"}
    assert _put_policy(url, token, "auto", params).status_code == 200

    rows: list[AuditRecord] = []
    deadline = time.monotonic() + 60
    while not rows and time.monotonic() < deadline:
        assert asyncio.run(_load(url, keys, 4.0)) > 0
        rows = _controller_rows(cluster)
    assert rows, cluster.logs()
    first = rows[0]
    assert first.old == {"name": "fcfs"} and first.new == {"name": "edf"}, first
    assert first.reason.startswith("rules: deadlines; view ")
    view = json.loads(first.reason.split("; view ", 1)[1])
    assert view["violation_rate"] > 0.2 and view["slo_share"] >= 0.5
    assert _running(url, token) in {"edf", "fcfs"}  # edf, or fcfs while a bypass runs
    controller = _policy(url, token)["controller"]
    assert controller["selector"] == "rules" and controller["pool"] == ["fcfs", "edf", "sjf"]
    assert controller["switches"][0]["to"] == "edf" and controller["view"] is not None
    scraped = httpx.get(metrics_url).text
    assert "arbiter_controller_active 1.0" in scraped
    assert 'arbiter_controller_view{field="violation_rate"}' in scraped
    assert 'arbiter_controller_switches_total{reason="deadlines",to="edf"}' in scraped

    assert _put_policy(url, token, "sjf", {}).status_code == 200  # pinned: the controller stops
    time.sleep(1.0)
    before = len(_controller_rows(cluster))
    asyncio.run(_load(url, keys, 5.0))
    time.sleep(1.0)
    assert _running(url, token) == "sjf"
    assert len(_controller_rows(cluster)) == before
    assert _policy(url, token)["controller"] is None
    assert "arbiter_controller_active 0.0" in httpx.get(metrics_url).text
