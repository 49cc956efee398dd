"""A small streaming load generator: N concurrent clients, time to first token and total."""

from __future__ import annotations

import asyncio
import itertools
import statistics
import time
from dataclasses import dataclass, field

import aiohttp
import orjson

TIMING_HEADER = "X-Arbiter-Timing"


@dataclass(frozen=True, slots=True)
class Target:
    """Where one request goes: a URL and its headers (an API key, the debug-timing ask)."""

    url: str
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class LoadResult:
    """Client-side timings (seconds) of one load run, and the gateway's stamps when asked."""

    ttft: list[float] = field(default_factory=list)
    total: list[float] = field(default_factory=list)
    errors: int = 0
    wall_s: float = 0.0
    sent: int = 0
    """Every request sent, the warm-up's and the unmeasured ones' included (what the
    processes' CPU was spent on)."""
    overlapping: int = 0
    """Unmeasured requests that ended inside the measured window: its throughput counts them
    (they were served in its time), its latencies do not."""
    stamps: list[dict[str, float]] = field(default_factory=list)
    """Per request: the gateway's `X-Arbiter-Timing` epochs plus the client's `sent` and
    `first_byte` epochs (same clock: the load runs on the gateway's machine)."""

    @property
    def rps(self) -> float:
        return (len(self.total) + self.overlapping) / self.wall_s if self.wall_s else 0.0

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


def parse_timing(value: str) -> dict[str, float]:
    """`name=epoch;name=epoch` (the gateway's debug header) as a dict; bad parts are skipped."""
    out: dict[str, float] = {}
    for part in value.split(";"):
        name, _, raw = part.partition("=")
        try:
            out[name.strip()] = float(raw)
        except ValueError:
            continue
    return out


async def _one(
    session: aiohttp.ClientSession, target: Target, body: bytes, out: LoadResult
) -> None:
    start = time.perf_counter()
    sent = time.time()
    first: float | None = None
    timing: str | None = None
    try:
        async with session.post(target.url, data=body, headers=target.headers) as resp:
            if resp.status != 200:
                await resp.read()
                out.errors += 1
                return
            timing = resp.headers.get(TIMING_HEADER)
            async for line in resp.content:
                if first is None and line.startswith(b"data: {"):
                    first = time.perf_counter()
    except (aiohttp.ClientError, OSError):
        out.errors += 1
        return
    end = time.perf_counter()
    out.ttft.append((first or end) - start)
    out.total.append(end - start)
    if timing is not None:
        stamps = parse_timing(timing)
        stamps["sent"], stamps["first_byte"] = sent, sent + ((first or end) - start)
        out.stamps.append(stamps)


async def run_load(
    targets: str | list[Target],
    *,
    concurrency: int,
    requests: int,
    body: dict[str, object],
    headers: dict[str, str] | None = None,
    warmup: int = 10,
) -> LoadResult:
    """`requests` streamed requests through `concurrency` clients (after a warm-up), sent to
    `targets` in turn (round robin; a plain URL with `headers` is one target).

    aiohttp rather than httpx: the load generator shares this machine's cores with what it
    measures, so it must cost as little per streamed line as possible.
    """
    if isinstance(targets, str):
        targets = [Target(targets, headers or {})]
    base = {"content-type": "application/json"}
    cycle = itertools.cycle([Target(t.url, {**base, **t.headers}) for t in targets])
    raw = orjson.dumps(body)
    connector = aiohttp.TCPConnector(limit=concurrency + 8)
    async with aiohttp.ClientSession(
        connector=connector, timeout=aiohttp.ClientTimeout(total=120)
    ) as session:
        warm = LoadResult()
        await asyncio.gather(*(_one(session, next(cycle), raw, warm) for _ in range(warmup)))
        out = await _steady(session, cycle, raw, concurrency, requests)
        out.sent += warmup
        out.errors += warm.errors
        return out


async def _steady(
    session: aiohttp.ClientSession,
    cycle: itertools.cycle[Target],
    raw: bytes,
    concurrency: int,
    requests: int,
) -> LoadResult:
    """`requests` measured requests from `concurrency` closed-loop clients, in steady state:
    every client first sends one request that is not measured (its connection opened, the
    clients no longer in step), and the measurement starts when the last of those ends."""
    out, unmeasured = LoadResult(), LoadResult()
    remaining = requests
    warming = concurrency
    steady = asyncio.Event()
    started = 0.0

    async def client() -> None:
        nonlocal remaining, warming, started
        await _one(session, next(cycle), raw, unmeasured)
        warming -= 1
        if warming == 0:
            started = time.perf_counter()
            steady.set()
        while not steady.is_set():  # keep the load on until every client is warm
            await _one(session, next(cycle), raw, unmeasured)
            if steady.is_set():
                out.overlapping += 1
        while remaining > 0:
            remaining -= 1
            await _one(session, next(cycle), raw, out)

    await asyncio.gather(*(client() for _ in range(concurrency)))
    out.wall_s = time.perf_counter() - started
    out.errors += unmeasured.errors
    out.sent = requests + len(unmeasured.total) + unmeasured.errors
    return out
