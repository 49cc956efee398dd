"""Closed-loop streaming clients for ``sim-bench``: one with httpx, one on raw asyncio streams.

Both send ``/v1/completions`` with ``stream: true`` and ``ignore_eos`` (every answer is exactly
``max_tokens`` tokens) and count SSE events (``data: ``) as they arrive. The raw client speaks
just enough HTTP/1.1 (keep-alive, chunked responses) to cost a few microseconds per read, so it
can load a worker harder than a Python HTTP library can.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import httpx
import orjson


@dataclass(frozen=True)
class ClientJob:
    """What one client process does: ``concurrency`` loops against ``url`` in ``window``."""

    url: str
    concurrency: int
    max_tokens: int
    prompt_words: int
    window: tuple[float, float]  # time.monotonic() bounds, shared by every process
    kind: str = "httpx"


class Tally:
    """Counts inside the measurement window (and errors anywhere)."""

    def __init__(self, window: tuple[float, float]) -> None:
        self.lo, self.hi = window
        self.events = self.requests = self.errors = 0

    def add_events(self, n: int) -> None:
        if self.lo <= time.monotonic() < self.hi:
            self.events += n

    def finish(self, seen: int, expected: int) -> None:
        if seen - 1 != expected:  # every token chunk, then [DONE]
            self.errors += 1
        if self.lo <= time.monotonic() < self.hi:
            self.requests += 1

    def result(self) -> dict[str, int]:
        # events counted in the window include the [DONE] of each request that ended in it
        return {"tokens": self.events - self.requests, "requests": self.requests,
                "errors": self.errors}  # fmt: skip


def _body(job: ClientJob) -> bytes:
    prompt = " ".join(["word"] * job.prompt_words)
    return orjson.dumps(
        {"prompt": prompt, "max_tokens": job.max_tokens, "ignore_eos": True, "stream": True}
    )


async def _httpx_loops(job: ClientJob, tally: Tally) -> None:
    body = _body(job)
    headers = {"content-type": "application/json"}
    limits = httpx.Limits(
        max_connections=job.concurrency, max_keepalive_connections=job.concurrency
    )

    async def one(client: httpx.AsyncClient) -> None:
        seen, tail = 0, b""
        url = f"{job.url}/v1/completions"
        async with client.stream("POST", url, content=body, headers=headers) as resp:
            if resp.status_code != 200:
                tally.errors += 1
                return
            async for raw in resp.aiter_raw():
                data = tail + raw
                n = data.count(b"data: ")
                tail, seen = data[-5:], seen + n
                tally.add_events(n)
        tally.finish(seen, job.max_tokens)

    async with httpx.AsyncClient(limits=limits, timeout=60.0) as client:
        await _loops(job, tally, lambda: one(client))


async def _raw_loops(job: ClientJob, tally: Tally) -> None:
    body = _body(job)
    host, port = job.url.removeprefix("http://").split(":")
    head = (
        f"POST /v1/completions HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()

    async def session() -> None:
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            while time.monotonic() < job.window[1]:
                writer.write(head + body)
                seen, tail = 0, b""
                while not tail.endswith(b"data: [DONE]\n\n\r\n0\r\n\r\n"):
                    raw = await reader.read(65536)
                    if not raw:
                        raise ConnectionError("server closed the connection")
                    data = tail + raw
                    n = data.count(b"data: ")
                    tail, seen = data[-64:], seen + n
                    tally.add_events(n)
                tally.finish(seen, job.max_tokens)
        finally:
            writer.close()

    await _loops(job, tally, session, repeat=False)


async def _loops(
    job: ClientJob, tally: Tally, one: Callable[[], Awaitable[None]], repeat: bool = True
) -> None:
    async def loop() -> None:
        while time.monotonic() < job.window[1]:
            try:
                await one()
            except (httpx.TransportError, OSError):
                tally.errors += 1
            if not repeat:
                return

    await asyncio.gather(*(loop() for _ in range(job.concurrency)))


def run_client(job: ClientJob) -> dict[str, int]:
    """Run one client process's loops until the window ends; its counts."""
    tally = Tally(job.window)
    loops = _raw_loops if job.kind == "raw" else _httpx_loops
    asyncio.run(loops(job, tally))
    return tally.result()
