"""Redis stopped mid-run: the gateway answers 503 + Retry-After, nothing dies, service resumes."""

from __future__ import annotations

import time

import httpx
import redis

from tests.support.cluster import Cluster
from tests.support.redis_server import RedisServer

BODY = {"model": "tiny-llama", "prompt": "hello", "max_tokens": 4, "ignore_eos": True}


def test_gateway_survives_redis_outage(cluster: Cluster, redis_server: RedisServer) -> None:
    keys = cluster.tenants(["t"])
    cluster.start_worker(speed=10.0)
    cluster.start_scheduler()
    url = cluster.start_gateway()
    h = {"Authorization": f"Bearer {keys['t']}"}
    assert httpx.post(f"{url}/v1/completions", json=BODY, headers=h, timeout=30).status_code == 200

    # production Redis persists (AOF); the test server has no persistence, so snapshot it
    client = redis.Redis.from_url(redis_server.url)
    client.save()
    client.close()
    redis_server.stop()
    try:
        started = time.monotonic()
        resp = httpx.post(f"{url}/v1/completions", json=BODY, headers=h, timeout=30)
        elapsed = time.monotonic() - started
        assert resp.status_code == 503, resp.text
        assert resp.headers["Retry-After"] == "1"
        assert resp.json()["error"]["code"] == "state_unavailable"
        assert elapsed < 5.0
        metrics = httpx.get(f"{url}/metrics", timeout=10).text  # counted where alerts look
        assert 'arbiter_gateway_failed_total{code="state_unavailable"} 1.0' in metrics
        ready = httpx.get(f"{url}/readyz", timeout=10)
        assert ready.status_code == 503
        time.sleep(2.0)  # every process keeps retrying with backoff
        dead = [c.name for c in cluster.children if not c.alive()]
        assert dead == [], cluster.logs()
    finally:
        redis_server.start()

    deadline = time.monotonic() + 20
    while True:
        resp = httpx.post(f"{url}/v1/completions", json=BODY, headers=h, timeout=30)
        if resp.status_code == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert resp.status_code == 200, resp.text
    assert resp.json()["usage"]["completion_tokens"] == 4
    assert [c.name for c in cluster.children if not c.alive()] == []
