"""Prometheus: the leader exports per-node fairness gauges and the active policy, the gateway
counts refusals; scraped over HTTP from real processes after real traffic."""

from __future__ import annotations

import time

import httpx
import openai
from prometheus_client.parser import text_string_to_metric_families

from tests.support.cluster import Cluster

NODE_GAUGES = (
    "arbiter_node_queued",
    "arbiter_node_inflight",
    "arbiter_node_oldest_wait_seconds",
    "arbiter_node_virtual_counter",
    "arbiter_node_credit",
    "arbiter_node_safi",
    "arbiter_node_service_rate",
    "arbiter_node_slo_attainment",
)


def _scrape(url: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    text = httpx.get(f"{url}/metrics", timeout=10).text
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return out


def _tenant(series: list[tuple[dict[str, str], float]], tenant: str) -> float:
    (value,) = [
        v for labels, v in series if labels["level"] == "tenant" and labels["tenant"] == tenant
    ]
    return value


def _families(url: str) -> set[str]:
    text = httpx.get(f"{url}/metrics", timeout=10).text
    return {family.name for family in text_string_to_metric_families(text)}


def _rate_limited(cluster: Cluster, tenant: str, rps: float) -> None:
    db = cluster.database()
    try:
        with db.repos() as r:
            r.tenants.update_tenant(name=tenant, changes={"rate_limit_rps": rps})
    finally:
        db.dispose()


def test_scheduler_and_gateway_export_fairness_and_refusals(cluster: Cluster) -> None:
    keys = cluster.tenants(["alpha", "beta", "gamma"])
    _rate_limited(cluster, "gamma", 0.1)  # a bucket of one request, refilled every 10 s
    cluster.start_worker()
    scheduler = cluster.start_scheduler()
    gw = cluster.start_gateway()
    for tenant, n in (("alpha", 6), ("beta", 2)):
        client = openai.OpenAI(base_url=f"{gw}/v1", api_key=keys[tenant])
        for _ in range(n):
            client.completions.create(
                model="tiny-llama",
                prompt="hello",
                max_tokens=8,
                extra_body={"ignore_eos": True},
                extra_headers={"X-Arbiter-App": "chat", "X-Arbiter-Agent": "bot"},
            )
    refused = httpx.post(
        f"{gw}/v1/completions", headers={"Authorization": "Bearer nope"}, json={}, timeout=10
    )
    assert refused.status_code == 401
    gamma = {"Authorization": f"Bearer {keys['gamma']}", "X-Arbiter-App": "chat"}
    body = {"model": "tiny-llama", "prompt": "hi", "max_tokens": 1}
    limited = [
        httpx.post(f"{gw}/v1/completions", headers=gamma, json=body, timeout=30).status_code
        for _ in range(2)
    ]
    assert limited == [200, 429], limited

    assert scheduler.health_url is not None
    sched_url = scheduler.health_url.removesuffix("/healthz")
    deadline = time.monotonic() + 20
    while True:  # the ledger's windows fill as completions arrive
        metrics = _scrape(sched_url)
        rates = metrics.get("arbiter_node_service_rate", [])
        served = {labels["tenant"] for labels, v in rates if labels["level"] == "tenant" and v > 0}
        if served >= {"alpha", "beta"}:
            break
        assert time.monotonic() < deadline, f"no service rates yet: {rates}"
        time.sleep(0.5)

    for name in NODE_GAUGES:
        series = metrics[name]
        levels = {labels["level"] for labels, _ in series}
        assert levels == {"tenant", "app", "agent"}, (name, levels)
    # alpha was served three times as much as beta, with the same prices
    assert _tenant(metrics["arbiter_node_service_rate"], "alpha") > _tenant(
        metrics["arbiter_node_service_rate"], "beta"
    )
    assert _tenant(metrics["arbiter_node_virtual_counter"], "alpha") > 0
    for labels, value in metrics["arbiter_node_slo_attainment"]:
        assert 0.0 <= value <= 1.0, labels
    for labels, value in metrics["arbiter_node_safi"]:
        assert 0.0 <= value <= 1.0, labels
    for name in (
        "arbiter_node_queued",
        "arbiter_node_inflight",
        "arbiter_node_oldest_wait_seconds",
    ):
        assert all(v >= 0 for _, v in metrics[name]), name
    agents = {
        (labels["tenant"], labels["app"], labels["agent"])
        for labels, _ in metrics["arbiter_node_queued"]
        if labels["level"] == "agent"
    }
    assert agents == {(t, "chat", "bot") for t in ("alpha", "beta")} | {
        ("gamma", "chat", "default")
    }
    ((info, one),) = metrics["arbiter_policy_info"]
    assert info["policy"] == cluster.policy and one == 1.0
    assert metrics["arbiter_scheduler_leader"][0][1] == 1.0
    assert metrics["arbiter_node_series_dropped"][0][1] == 0.0
    # the controller's gauges: pinned policy → inactive, no view; caps, when set, positive
    ((_, active),) = metrics["arbiter_controller_active"]
    assert active == (1.0 if cluster.policy == "auto" else 0.0)
    assert bool(metrics.get("arbiter_controller_view")) == (active == 1.0)
    assert all(v > 0 for _, v in metrics.get("arbiter_controller_limit", []))
    switches = metrics.get("arbiter_controller_switches_total", [])
    assert all(v >= 0 for _, v in switches)
    assert {"arbiter_controller_view", "arbiter_controller_limit"} <= _families(sched_url)
    assert "arbiter_controller_switches" in _families(sched_url)

    gateway = _scrape(gw)
    reasons = {labels["reason"]: v for labels, v in gateway["arbiter_gateway_rejected_total"]}
    assert reasons.get("invalid_api_key", 0) >= 1
    assert reasons.get("rate_limit_exceeded", 0) == 1  # the one 429 above, counted once
