"""A small streaming load generator: N concurrent clients, time to first token and total."""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import dataclass, field

import httpx


@dataclass
class LoadResult:
    """Client-side timings (seconds) of one load run."""

    ttft: list[float] = field(default_factory=list)
    total: list[float] = field(default_factory=list)
    errors: int = 0
    wall_s: float = 0.0

    @property
    def rps(self) -> float:
        return len(self.total) / self.wall_s if self.wall_s else 0.0

    def pct(self, name: str, q: float) -> float:
        xs: list[float] = sorted(getattr(self, name))
        if not xs:
            return float("nan")
        return xs[min(len(xs) - 1, int(q * len(xs)))]

    def summary(self) -> dict[str, float]:
        return {
            "requests": len(self.total),
            "errors": self.errors,
            "rps": self.rps,
            "ttft_p50_ms": self.pct("ttft", 0.5) * 1e3,
            "ttft_p99_ms": self.pct("ttft", 0.99) * 1e3,
            "total_p50_ms": self.pct("total", 0.5) * 1e3,
            "ttft_mean_ms": statistics.fmean(self.ttft) * 1e3 if self.ttft else float("nan"),
        }


async def _one(
    client: httpx.AsyncClient,
    url: str,
    body: dict[str, object],
    headers: dict[str, str],
    out: LoadResult,
) -> None:
    start = time.perf_counter()
    first: float | None = None
    try:
        async with client.stream("POST", url, json=body, headers=headers) as resp:
            if resp.status_code != 200:
                await resp.aread()
                out.errors += 1
                return
            async for line in resp.aiter_lines():
                if first is None and line.startswith("data: {"):
                    first = time.perf_counter()
    except httpx.HTTPError:
        out.errors += 1
        return
    end = time.perf_counter()
    out.ttft.append((first or end) - start)
    out.total.append(end - start)


async def run_load(
    url: str,
    *,
    concurrency: int,
    requests: int,
    body: dict[str, object],
    headers: dict[str, str] | None = None,
    warmup: int = 10,
) -> LoadResult:
    """`requests` streamed requests through `concurrency` clients (after a warm-up)."""
    limits = httpx.Limits(
        max_connections=concurrency + 8, max_keepalive_connections=concurrency + 8
    )
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:
        warm = LoadResult()
        await asyncio.gather(*(_one(client, url, body, headers or {}, warm) for _ in range(warmup)))
        out = LoadResult()
        queue: asyncio.Queue[int] = asyncio.Queue()
        for i in range(requests):
            queue.put_nowait(i)

        async def worker() -> None:
            while not queue.empty():
                queue.get_nowait()
                await _one(client, url, body, headers or {}, out)

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        out.wall_s = time.perf_counter() - started
        return out
