"""A small streaming load generator: N concurrent clients, time to first token and total."""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import dataclass, field

import aiohttp
import orjson


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
    session: aiohttp.ClientSession, url: str, body: bytes, headers: dict[str, str], out: LoadResult
) -> None:
    start = time.perf_counter()
    first: float | None = None
    try:
        async with session.post(url, data=body, headers=headers) as resp:
            if resp.status != 200:
                await resp.read()
                out.errors += 1
                return
            async for line in resp.content:
                if first is None and line.startswith(b"data: {"):
                    first = time.perf_counter()
    except (aiohttp.ClientError, OSError):
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
    """`requests` streamed requests through `concurrency` clients (after a warm-up).

    aiohttp rather than httpx: the load generator shares this machine's cores with what it
    measures, so it must cost as little per streamed line as possible.
    """
    raw = orjson.dumps(body)
    hdrs = {"content-type": "application/json", **(headers or {})}
    connector = aiohttp.TCPConnector(limit=concurrency + 8)
    async with aiohttp.ClientSession(
        connector=connector, timeout=aiohttp.ClientTimeout(total=120)
    ) as session:
        warm = LoadResult()
        await asyncio.gather(*(_one(session, url, raw, hdrs, warm) for _ in range(warmup)))
        out = LoadResult()
        remaining = requests

        async def worker() -> None:
            nonlocal remaining
            while remaining > 0:
                remaining -= 1
                await _one(session, url, raw, hdrs, out)

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        out.wall_s = time.perf_counter() - started
        return out
