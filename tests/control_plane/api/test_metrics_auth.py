"""`/metrics` over HTTP: the optional bearer token, tenant-label redaction, and refusals at the
door counted in `arbiter_gateway_rejected` (429s included)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from control_plane.contracts.workers import WorkerEntry
from control_plane.core.job import Job
from control_plane.gateway.flight import Flight
from control_plane.gateway.identity import NodeInfo, TenantInfo
from control_plane.gateway.metrics import hashed_tenant
from tests.control_plane.api.gateway_app import Gateway, gateway

TENANT = "acme"
MODEL = "tiny-llama"


def _finish_one_request(gw: Gateway) -> None:
    """Record a finished request of `acme` as the gateway does after relaying one."""
    now = time.time()
    job = Job(id="req-1", tenant=TENANT, arrival=now, n_in=3, max_tokens=5, model=MODEL)
    flight = Flight(job, NodeInfo(TenantInfo(TENANT), "default", "default"), False, {}, now)
    flight.submitted_at, flight.granted_at = now, now
    gw.app.state.metrics.completed(flight, "ok")


async def test_token_is_required_when_set(redis_url: str, tmp_path: Path) -> None:
    async with gateway(redis_url, tmp_path, metrics_token="m-secret") as gw:
        _finish_one_request(gw)
        async with gw.client() as client:
            missing = await client.get("/metrics")
            wrong = await client.get("/metrics", headers={"Authorization": "Bearer nope"})
            basic = await client.get("/metrics", headers={"Authorization": "Basic m-secret"})
            tenant_key = await client.get("/metrics", headers={"Authorization": f"Bearer {gw.key}"})
            ok = await client.get("/metrics", headers={"Authorization": "Bearer m-secret"})

    for refused in (missing, wrong, basic, tenant_key):
        assert refused.status_code == 401
        assert refused.json()["error"]["code"] == "invalid_metrics_token"
        assert refused.headers["www-authenticate"] == "Bearer"
        assert TENANT not in refused.text
    assert ok.status_code == 200
    assert f'arbiter_gateway_requests_total{{status="ok",tenant="{TENANT}"}} 1.0' in ok.text


@pytest.mark.parametrize("mode", ["auto", "hash"])
async def test_open_metrics_hash_tenant_names(redis_url: str, tmp_path: Path, mode: str) -> None:
    async with gateway(redis_url, tmp_path, metrics_tenant_labels=mode) as gw:
        _finish_one_request(gw)
        async with gw.client() as client:
            text = (await client.get("/metrics")).text

    assert TENANT not in text
    label = hashed_tenant(TENANT)
    assert f'arbiter_gateway_requests_total{{status="ok",tenant="{label}"}} 1.0' in text
    assert f'arbiter_gateway_queue_seconds_count{{tenant="{label}"}} 1.0' in text


async def test_none_drops_the_tenant_label(redis_url: str, tmp_path: Path) -> None:
    async with gateway(redis_url, tmp_path, metrics_tenant_labels="none", metrics_token="m") as gw:
        _finish_one_request(gw)
        async with gw.client(headers={"Authorization": "Bearer m"}) as client:
            text = (await client.get("/metrics")).text

    assert TENANT not in text and "tenant=" not in text
    assert 'arbiter_gateway_requests_total{status="ok"} 1.0' in text
    assert "arbiter_gateway_output_tokens_total 0.0" in text


async def test_door_refusals_are_counted(redis_url: str, tmp_path: Path) -> None:
    async with gateway(redis_url, tmp_path) as gw:
        with gw.db.repos() as r:
            r.tenants.update_tenant(name=TENANT, changes={"token_budget": 10})
        stores = gw.app.state.stores
        await stores.workers.upsert(WorkerEntry("w1", "http://127.0.0.1:9", model=MODEL))
        await stores.token_budgets.add(TENANT, 10, time.time())
        body = {"model": MODEL, "prompt": "hi", "max_tokens": 1}
        async with gw.client() as client:
            over = await client.post(
                "/v1/completions", json=body, headers={"Authorization": f"Bearer {gw.key}"}
            )
            bad = await client.get("/v1/models", headers={"Authorization": "Bearer " + "n" * 30})
            text = (await client.get("/metrics")).text

    assert over.status_code == 429 and over.json()["error"]["code"] == "token_budget_exceeded"
    assert bad.status_code == 401
    assert 'arbiter_gateway_rejected_total{reason="token_budget_exceeded"} 1.0' in text
    assert 'arbiter_gateway_rejected_total{reason="invalid_api_key"} 1.0' in text
