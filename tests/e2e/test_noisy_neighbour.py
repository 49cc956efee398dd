"""Noisy neighbour, live: tenant A keeps 40 streams in flight, tenant B sends a trickle.

Under `fcfs`, B waits behind A's whole backlog. Under `vtc`, B's request goes to the *next*
slot that frees: scheduling is non-preemptive, so no policy can do better while A fills every
slot. The test asserts that guarantee against A's measured slot turnover, asserts the
several-fold contrast with FCFS, and prints every number. The policy is switched live through
the `policy` knob, as an operator would.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import dataclass, field

import httpx

from control_plane.contracts.knobs import PluginChoice
from control_plane.state import StateStores
from tests.support.cluster import Cluster

A_STREAMS = 40
SLOTS = 8  # 2 workers × max_num_seqs 4
SPEED = 0.25
"""The workers run the profile at a quarter of its pace (a 16-token answer ~0.2 s): A then needs
~40 requests/s, not ~150, to keep every slot busy and 32 queued. At full pace that load is
CPU-bound on 2 busy cores: the client, gateway and scheduler could not re-issue A's requests as
fast as slots freed, A's backlog vanished and FCFS had nothing to make B wait behind (measured
beside 4 busy loops: FCFS 0.01-4.5 ms against VTC 0.02-3.3 ms, the contrast failed)."""


@dataclass
class Phase:
    b_queue_ms: list[float] = field(default_factory=list)
    a_service_s: list[float] = field(default_factory=list)
    a_queue_ms: list[float] = field(default_factory=list)
    a_waiting: int = 0
    """A's streams sent and not yet holding a slot (no headers yet), as the client sees it."""

    @property
    def a_queue_mean(self) -> float:
        return statistics.mean(self.a_queue_ms) if self.a_queue_ms else 0.0

    @property
    def b_mean(self) -> float:
        return statistics.mean(self.b_queue_ms)

    @property
    def slot_interval_ms(self) -> float:
        """Mean time between two of A's slots freeing: service time / slots."""
        return 1000 * statistics.mean(self.a_service_s) / SLOTS if self.a_service_s else 0.0


async def _a_stream(
    client: httpx.AsyncClient, url: str, key: str, stop: asyncio.Event, out: Phase
) -> None:
    body = {
        "model": "tiny-llama",
        "prompt": "noisy " * 20,
        "max_tokens": 16,
        "ignore_eos": True,
        "stream": True,
    }
    while not stop.is_set():
        out.a_waiting += 1
        async with client.stream(
            "POST", f"{url}/v1/completions", json=body, headers={"Authorization": f"Bearer {key}"}
        ) as resp:
            out.a_waiting -= 1
            assert resp.status_code == 200
            started = time.monotonic()  # headers arrive once the request holds a slot
            out.a_queue_ms.append(float(resp.headers["X-Arbiter-Queue-Ms"]))
            async for _ in resp.aiter_bytes():
                pass
            out.a_service_s.append(time.monotonic() - started)


async def _b_trickle(client: httpx.AsyncClient, url: str, key: str, n: int, out: Phase) -> None:
    body = {"model": "tiny-llama", "prompt": "quiet question", "max_tokens": 4, "ignore_eos": True}
    for _ in range(n):
        resp = await client.post(
            f"{url}/v1/completions", json=body, headers={"Authorization": f"Bearer {key}"}
        )
        assert resp.status_code == 200, resp.text
        out.b_queue_ms.append(float(resp.headers["X-Arbiter-Queue-Ms"]))
        await asyncio.sleep(0.15)


async def _phase(url: str, keys: dict[str, str], noisy: bool, n: int = 20) -> Phase:
    out, stop = Phase(), asyncio.Event()
    async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=200)) as client:
        tasks = [
            asyncio.create_task(_a_stream(client, url, keys["a"], stop, out))
            for _ in range(A_STREAMS if noisy else 0)
        ]
        if noisy:
            # let A's backlog build up: every slot held and most of the rest waiting, however
            # slow the box (a fixed pause was 2 s; a deadline only bounds a load that never
            # builds, which the backlog assertions then report)
            for _ in range(600):  # 30 s at most
                if len(out.a_service_s) >= SLOTS and out.a_waiting >= A_STREAMS - 2 * SLOTS:
                    break
                await asyncio.sleep(0.05)
            out.a_service_s.clear()
            out.a_queue_ms.clear()
        await _b_trickle(client, url, keys["b"], n, out)
        stop.set()
        await asyncio.gather(*tasks)
    return out


async def _set_policy(cluster: Cluster, name: str) -> None:
    stores = StateStores.open(cluster.redis_url, cluster.cluster)
    await stores.knobs.set("policy", PluginChoice(name))
    await stores.aclose()


def test_vtc_protects_the_quiet_tenant(cluster: Cluster) -> None:
    keys = cluster.tenants(["a", "b"])
    cluster.start_worker(speed=SPEED, max_num_seqs=SLOTS // 2)
    cluster.start_worker(speed=SPEED, max_num_seqs=SLOTS // 2)
    cluster.start_scheduler()
    url = cluster.start_gateway()
    alone = asyncio.run(_phase(url, keys, noisy=False))
    vtc = asyncio.run(_phase(url, keys, noisy=True))
    asyncio.run(_set_policy(cluster, "fcfs"))
    time.sleep(0.5)
    fcfs = asyncio.run(_phase(url, keys, noisy=True))
    print(
        f"\nB mean queue ms: alone {alone.b_mean:.2f}, vtc {vtc.b_mean:.2f} "
        f"({vtc.b_mean / alone.b_mean:.1f}x alone), fcfs {fcfs.b_mean:.2f} "
        f"({fcfs.b_mean / vtc.b_mean:.1f}x vtc); A's slots free every "
        f"{vtc.slot_interval_ms:.1f} ms under vtc; A's mean queue ms: vtc {vtc.a_queue_mean:.1f}, "
        f"fcfs {fcfs.a_queue_mean:.1f} ({fcfs.a_queue_mean / vtc.slot_interval_ms:.1f} intervals)"
    )
    # the premise of both assertions: A kept a backlog, its own requests waited many slot frees
    # (32 queued behind 8 slots: ~32 intervals); without one no policy has anything to order
    backlog = 8 * vtc.slot_interval_ms
    assert min(vtc.a_queue_mean, fcfs.a_queue_mean) >= backlog, ("no backlog from A", vtc, fcfs)
    # VTC: B waits a few slot frees whatever A's backlog (32 queued, which FCFS makes it wait
    # behind: ~16 intervals on average): one of the next two slots ideally (a lifted counter
    # ties with A's and the tie goes to the earlier arrival), plus dispatch hops slowed by A's
    # load on these 2 cores — measured 2-4.5 intervals; 8 keeps the test clear of that noise
    assert vtc.b_mean <= 2 * alone.b_mean + 8 * vtc.slot_interval_ms, (alone, vtc)
    assert fcfs.b_mean >= 4 * vtc.b_mean, (vtc.b_mean, fcfs.b_mean)
