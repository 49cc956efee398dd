"""The overhead bench's CPU meter (the kernel's accounting per process) and its steady-state
load: what a round counts as requests, and what it measures."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from aiohttp import web

from control_plane.bench import procs
from control_plane.bench.load import Target, run_load
from control_plane.bench.overhead_cpu import (
    CpuMeter,
    Usage,
    context_switches,
    cpu_seconds,
    measured_pids,
    per_request_ms,
    switches_per_request,
)
from control_plane.up.tether import tethered


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


def test_a_process_that_blocks_is_counted_as_waiting_each_time() -> None:
    """Every sleep of a child, in any of its threads, is a voluntary switch."""
    code = (
        "import threading, time, sys\n"
        "sys.stdin.readline()\n"
        "t = threading.Thread(target=lambda: [time.sleep(0.001) for _ in range(50)])\n"
        "t.start()\n"
        "[time.sleep(0.001) for _ in range(200)]\n"
        "t.join(); print('slept', flush=True); time.sleep(30)\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdin is not None and child.stdout is not None
        meter = CpuMeter({"child": child.pid})
        meter.start()
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline() == "slept\n"
        meter.stop()
        # the main thread's 200 sleeps at least (the helper's 50 end with it)
        assert meter.spent["child"].waits >= 200
        assert context_switches(child.pid) is not None
    finally:
        child.kill()
        child.wait()
    assert context_switches(child.pid) is None  # gone


def test_switches_per_request_add_a_total() -> None:
    spent = {"gateway": Usage(0.1, 300, 30), "redis": Usage(0.1, 100, 0)}
    assert switches_per_request(spent, 100) == (
        {"gateway": 3.0, "redis": 1.0, "total": 4.0},
        {"gateway": 0.3, "redis": 0.0, "total": 0.3},
    )
    assert switches_per_request(spent, 0) == ({}, {})


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


def test_a_tethered_child_s_cpu_is_read_from_the_command_it_runs(tmp_path: Path) -> None:
    """Regression: `arbiter up` runs Redis under its tether, and the meter read the tether's
    CPU: `bench overhead` reported Redis at 0.000 CPU-ms per request (2026-11-29 05:42)."""
    server = shutil.which("redis-server")
    assert server is not None  # the suite's own Redis needs it
    argv = [server, "--port", "0", "--unixsocket", f"{tmp_path}/r.sock", "--save", ""]
    tether = subprocess.Popen(tethered([*argv, "--dir", str(tmp_path)]), stdout=subprocess.DEVNULL)
    try:
        while not procs.is_tether(tether.pid):  # the interpreter is starting the tether
            time.sleep(0.01)
        if not procs.descendants(tether.pid):  # its command not started yet: left out
            assert measured_pids({"redis": {"pid": tether.pid}}) == {"redis": None}
        deadline = time.monotonic() + 10
        while not procs.descendants(tether.pid):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        (redis,) = procs.descendants(tether.pid)
        status = {"redis": {"pid": tether.pid}, "gateway": {"pid": os.getpid()}, "x": {"pid": None}}
        assert measured_pids(status) == {"redis": redis, "gateway": os.getpid(), "x": None}
    finally:
        tether.kill()  # its command gets the parent-death SIGKILL
        tether.wait()
