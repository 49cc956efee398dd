"""The overhead bench's CPU meter (the kernel's accounting per process) and its steady-state
load: what a round counts as requests, and what it measures."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from aiohttp import web

from control_plane.bench.load import Target, run_load
from control_plane.bench.overhead_cpu import CpuMeter, cpu_seconds, per_request_ms


def _burn(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_a_process_cpu_time_is_read_from_the_kernel() -> None:
    before = cpu_seconds(os.getpid())
    assert before is not None
    _burn(0.12)
    after = cpu_seconds(os.getpid())
    assert after is not None and after - before >= 0.08


def test_the_meter_leaves_out_a_process_that_is_gone() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    meter = CpuMeter({"child": child.pid, "none": None})
    meter.start()
    child.kill()
    child.wait()
    _burn(0.05)
    spent = meter.stop()
    assert set(spent) == {"loadgen"}  # this process is measured as the load generator
    assert spent["loadgen"] > 0


def test_cpu_per_request_adds_a_total() -> None:
    assert per_request_ms({"gateway": 0.5, "redis": 0.25}, 500) == {
        "gateway": 1.0,
        "redis": 0.5,
        "total": 1.5,
    }
    assert per_request_ms({"gateway": 0.5}, 0) == {}


async def test_a_round_measures_only_once_every_client_has_its_connection() -> None:
    seen: list[float] = []

    async def stream(request: web.Request) -> web.StreamResponse:
        seen.append(time.perf_counter())
        resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(b'data: {"x": 1}\n\n')
        await resp.write(b"data: [DONE]\n\n")
        return resp

    app = web.Application()
    app.router.add_post("/v1/completions", stream)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        out = await run_load(
            [Target(f"http://127.0.0.1:{port}/v1/completions")],
            concurrency=4,
            requests=20,
            body={"stream": True},
            warmup=2,
        )
    finally:
        await runner.cleanup()
    assert len(out.total) == len(out.ttft) == 20 and out.errors == 0
    # warm-up + one unmeasured request per client at least, every one counted as sent
    assert out.sent == len(seen) >= 20 + 2 + 4
    assert out.wall_s > 0
    # unmeasured requests that ended once measuring began count for throughput only
    assert 0 <= out.overlapping < 4
    assert out.rps == pytest.approx((20 + out.overlapping) / out.wall_s)
