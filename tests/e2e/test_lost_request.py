"""A request that Redis loses while it waits (a restarted Redis replays its append-only file,
which can miss the last writes) is submitted again by its gateway and served, instead of
waiting for a grant that can never come until its queue timeout."""

from __future__ import annotations

import asyncio
import time

import httpx

from control_plane.state import connect
from tests.support.cluster import Cluster

BODY = {"model": "tiny-llama", "prompt": "hello", "max_tokens": 4, "ignore_eos": True}


async def _forget_everything(redis_url: str) -> int:
    """What a Redis restart that lost its last writes looks like to the waiting gateway."""
    client = connect(redis_url)
    try:
        requests = [k async for k in client.scan_iter(match="arb:*:req:*")]
        queues = [k async for k in client.scan_iter(match="arb:*:*queued")]
        await client.delete(*requests, *queues)
        return len(requests)
    finally:
        await client.aclose()


def test_a_request_redis_lost_is_submitted_again_and_served(cluster: Cluster) -> None:
    keys = cluster.tenants(["t"])
    cluster.extra_env["ARBITER_LOST_CHECK_INTERVAL_S"] = "0.5"
    cluster.extra_env["ARBITER_QUEUE_TIMEOUT_S"] = "60"
    cluster.extra_env["ARBITER_NO_LEADER_503_AFTER_S"] = "60"  # no scheduler at first
    cluster.start_worker(speed=10.0)
    url = cluster.start_gateway()  # no scheduler yet: the request stays queued

    async def scenario() -> httpx.Response:
        async with httpx.AsyncClient(timeout=40) as client:
            call = asyncio.create_task(
                client.post(
                    f"{url}/v1/completions",
                    json=BODY,
                    headers={"Authorization": f"Bearer {keys['t']}"},
                )
            )
            await asyncio.sleep(1.0)
            assert await _forget_everything(cluster.redis_url) == 1
            await asyncio.sleep(1.5)  # the gateway notices and submits it again
            cluster.start_scheduler()
            return await call

    started = time.monotonic()
    resp = asyncio.run(scenario())

    assert resp.status_code == 200, resp.text
    assert time.monotonic() - started < 35
    assert "submitted again" in cluster.logs()
