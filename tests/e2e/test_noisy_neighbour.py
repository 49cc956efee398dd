"""Noisy neighbour, live: tenant A keeps 40 streams in flight, tenant B sends a trickle.

Under `vtc`, B's mean queue time stays close to its queue time alone; under `fcfs` it grows
several-fold. The policy is switched live through the `policy` knob, as an operator would.
"""

from __future__ import annotations

import asyncio
import statistics
import time

import httpx

from control_plane.state import StateStores
from tests.support.cluster import Cluster

A_STREAMS = 40


async def _a_stream(client: httpx.AsyncClient, url: str, key: str, stop: asyncio.Event) -> None:
    body = {
        "model": "tiny-llama",
        "prompt": "noisy " * 20,
        "max_tokens": 16,
        "ignore_eos": True,
        "stream": True,
    }
    while not stop.is_set():
        async with client.stream(
            "POST", f"{url}/v1/completions", json=body, headers={"Authorization": f"Bearer {key}"}
        ) as resp:
            assert resp.status_code == 200
            async for _ in resp.aiter_bytes():
                pass


async def _b_trickle(client: httpx.AsyncClient, url: str, key: str, n: int) -> list[float]:
    queue_ms = []
    body = {"model": "tiny-llama", "prompt": "quiet question", "max_tokens": 4, "ignore_eos": True}
    for _ in range(n):
        resp = await client.post(
            f"{url}/v1/completions", json=body, headers={"Authorization": f"Bearer {key}"}
        )
        assert resp.status_code == 200, resp.text
        queue_ms.append(float(resp.headers["X-Arbiter-Queue-Ms"]))
        await asyncio.sleep(0.15)
    return queue_ms


async def _phase(url: str, keys: dict[str, str], noisy: bool, n: int = 20) -> float:
    stop = asyncio.Event()
    async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=200)) as client:
        tasks = [
            asyncio.create_task(_a_stream(client, url, keys["a"], stop))
            for _ in range(A_STREAMS if noisy else 0)
        ]
        if noisy:
            await asyncio.sleep(2.0)  # let A's backlog build up
        b = await _b_trickle(client, url, keys["b"], n)
        stop.set()
        await asyncio.gather(*tasks)
    return statistics.mean(b)


async def _set_policy(cluster: Cluster, name: str) -> None:
    stores = StateStores.open(cluster.redis_url, cluster.cluster)
    await stores.knobs.set("policy", {"name": name, "params": {}})
    await stores.aclose()


def test_vtc_protects_the_quiet_tenant(cluster: Cluster) -> None:
    keys = cluster.tenants(["a", "b"])
    cluster.start_worker(speed=1.0, max_num_seqs=4)
    cluster.start_worker(speed=1.0, max_num_seqs=4)
    cluster.start_scheduler()
    url = cluster.start_gateway()
    alone = asyncio.run(_phase(url, keys, noisy=False))
    vtc = asyncio.run(_phase(url, keys, noisy=True))
    asyncio.run(_set_policy(cluster, "fcfs"))
    time.sleep(0.5)
    fcfs = asyncio.run(_phase(url, keys, noisy=True))
    print(f"\nB mean queue ms: alone {alone:.2f}, vtc {vtc:.2f}, fcfs {fcfs:.2f}")
    assert vtc <= 2 * alone + 5.0, (alone, vtc, fcfs)
    assert fcfs >= 4 * vtc, (alone, vtc, fcfs)
