"""`arbiter bench soak`: hold a deployment at a steady fraction of its capacity for a long time
and watch every process's memory.

Capacity is either given (`rate`, requests/s) or measured first: `capacity_concurrency`
closed-loop clients send the soak's own request mix for `capacity_s` seconds, and the rate of
requests served in the second half is the capacity. A short run on a fresh deployment
overstates what it sustains (its keyspace, database and AOF are still small): on the 2-core
machine a 30-s run measured 100.9 req/s while the deployment then held only ~72 req/s for 28
minutes, so the default run is two minutes and only its second minute counts.

The soak then sends `load × capacity` requests/s (Poisson arrivals, seeded) for `minutes`:
streamed and non-streamed chat completions alternating between two tenants. An arrival the
generator reaches more than `max_lag_s` late is not sent and is counted
(`not_sent_generator_behind`; the soak fails when over 5 % of the arrivals went unsent):
catching up in a burst would hand the deployment a load it was not meant to see. Every
`sample_s` it records the RSS of each process of the deployment, Redis's `used_memory`, the
requests sent and the outcomes so far.
"""

from __future__ import annotations

import asyncio
import collections
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

import openai

from control_plane.bench import footprint
from control_plane.bench.chat_client import chat, client_for
from control_plane.bench.off_loop import off_loop
from control_plane.bench.soak_report import Sample
from control_plane.bench.up_process import UpProcess

MAX_EXAMPLES = 20


@dataclass(frozen=True)
class SoakPlan:
    """How long, how hard and with what requests the soak runs."""

    minutes: float = 30.0
    load: float = 0.8
    rate: float | None = None
    """Requests/s to send; None: `load` × the capacity measured first."""
    capacity_s: float = 120.0
    capacity_concurrency: int = 64
    sample_s: float = 60.0
    warmup_s: float = 180.0
    """Three times the longest retention in Redis (a recorded request's hash lives 60 s), so
    the keyspace holds its steady population and the allocator its working set."""
    max_tokens: int = 32
    tenants: tuple[str, ...] = ("acme", "globex")
    bound_s: float = 120.0
    max_in_flight: int = 2000
    max_lag_s: float = 1.0
    """An arrival the generator reaches later than this is not sent (and counted): a
    generator that falls behind must not catch up in a burst the deployment never saw."""
    seed: int = 0


class Load:
    """The soak's clients: one `openai` client per tenant, request `i` of a fixed mix."""

    def __init__(self, up: UpProcess, plan: SoakPlan) -> None:
        keys = up.keys()
        self.plan = plan
        self.clients: dict[str, openai.AsyncOpenAI] = {
            t: client_for(up.gateway, keys[t], plan.bound_s) for t in plan.tenants
        }
        self.outcomes: collections.Counter[str] = collections.Counter()
        self.in_flight = 0
        self.sent = 0
        self.failures: list[dict[str, object]] = []
        """The first `MAX_EXAMPLES` failures, with what the client saw."""

    async def one(self, i: int) -> str:
        """Request `i`: tenants alternate, and streamed / non-streamed alternate per tenant."""
        n = len(self.plan.tenants)
        tenant = self.plan.tenants[i % n]
        stream = (i // n) % 2 == 0
        self.in_flight += 1
        try:
            o = await chat(
                self.clients[tenant],
                tenant,
                max_tokens=self.plan.max_tokens,
                bound_s=self.plan.bound_s,
                stream=stream,
            )
        finally:
            self.in_flight -= 1
        self.outcomes[o.kind] += 1
        if not o.ok and len(self.failures) < MAX_EXAMPLES:
            self.failures.append(
                {"kind": o.kind, "detail": o.detail, "request_id": o.request_id, "at": o.ended}
            )
        return o.kind

    async def close(self) -> None:
        for c in self.clients.values():
            await c.close()


async def measure_capacity(load: Load, plan: SoakPlan) -> float:
    """Requests/s served by `capacity_concurrency` closed-loop clients in the second half of
    `capacity_s` (the first half fills the keyspace, the database and the AOF)."""
    end = time.monotonic() + plan.capacity_s
    counted_from = time.monotonic() + plan.capacity_s / 2
    served = 0
    counter = iter(range(10**9))

    async def client() -> None:
        nonlocal served
        while time.monotonic() < end:
            kind = await load.one(next(counter))
            if kind == "ok" and time.monotonic() >= counted_from:
                served += 1

    await asyncio.gather(*(client() for _ in range(plan.capacity_concurrency)))
    load.outcomes.clear()
    load.failures.clear()
    return served / max(1e-9, plan.capacity_s / 2)


async def drive(
    up: UpProcess, load: Load, rate: float, on_sample: Callable[[Sample], None]
) -> list[Sample]:
    """Send `rate` requests/s for the plan's minutes; sample every `sample_s` (and at 0)."""
    plan = load.plan
    rng = random.Random(plan.seed)
    started = time.monotonic()
    end = started + plan.minutes * 60.0
    samples: list[Sample] = []
    in_flight: set[asyncio.Task[str]] = set()

    async def sampler() -> None:
        n = 0
        while True:
            due = started + n * plan.sample_s
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            if due > end + 1e-6:
                return
            found = await off_loop(up.processes)
            fp = await footprint.sample(found, str(up.info.get("redis_url", "")))
            at = time.monotonic() - started
            s = Sample(at, fp, dict(load.outcomes), load.in_flight, load.sent)
            samples.append(s)
            on_sample(s)
            n += 1

    sampling = asyncio.create_task(sampler())
    i, next_at = 0, started
    while next_at < end:
        await asyncio.sleep(max(0.0, next_at - time.monotonic()))
        if time.monotonic() - next_at > plan.max_lag_s:
            load.outcomes["not_sent_generator_behind"] += 1
        elif len(in_flight) >= plan.max_in_flight:
            load.outcomes["not_sent_client_backlog"] += 1
        else:
            load.sent += 1
            task = asyncio.create_task(load.one(i))
            in_flight.add(task)
            task.add_done_callback(in_flight.discard)
        i += 1
        next_at += rng.expovariate(rate)
    await sampling
    await asyncio.gather(*in_flight)
    return samples
