"""``sim-bench``: what one simulated worker process sustains, measured from real clients.

Starts ``python -m workers.sim`` on a free port, then ``clients`` client processes drive it with
``concurrency`` streaming ``/v1/completions`` requests in total (``workers.sim.bench_clients``:
httpx, or a raw asyncio client that costs the load generator far less; ``ignore_eos``, so each
answer is exactly ``max_tokens`` tokens), closed loop: each client sends its next request when
the previous one ends. After one second of warm-up, tokens and finished requests are counted for
``duration_s`` seconds. ``server_tokens_per_s`` cross-checks the clients' count with the
worker's own ``vllm:generation_tokens_total``.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import httpx

from workers.sim.bench_clients import ClientJob, run_client

WARMUP_S = 1.0


@dataclass(frozen=True)
class BenchSpec:
    """One benchmark run."""

    profile: str = "tiny-cpu"
    speed: float = 1000.0
    concurrency: int = 64
    duration_s: float = 10.0
    max_tokens: int = 256
    prompt_words: int = 32
    clients: int = 1
    client: str = "httpx"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _generation_tokens(url: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=10.0).text
    for line in text.splitlines():
        if line.startswith("vllm:generation_tokens_total{"):
            return float(line.rsplit(" ", 1)[1])
    raise RuntimeError("vllm:generation_tokens_total missing from /metrics")


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (Linux /proc; NaN elsewhere)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    except OSError:
        return float("nan")
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _wait_healthy(url: str, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"simulated worker exited with {proc.returncode}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/health", timeout=1.0).status_code == 200:
                return
        time.sleep(0.1)
    raise TimeoutError(f"{url}/health did not answer within {timeout}s")


def _drive(spec: BenchSpec, url: str, pid: int) -> dict[str, Any]:
    start = time.monotonic() + WARMUP_S + 0.5 * spec.clients
    window = (start, start + spec.duration_s)
    per = [spec.concurrency // spec.clients] * spec.clients
    per[0] += spec.concurrency - sum(per)
    jobs = [ClientJob(url, c, spec.max_tokens, spec.prompt_words, window, spec.client) for c in per]
    with ProcessPoolExecutor(spec.clients, mp_context=get_context("spawn")) as pool:
        futures = [pool.submit(run_client, job) for job in jobs]
        time.sleep(max(0.0, start - time.monotonic()))
        gen0, cpu0 = _generation_tokens(url), _cpu_seconds(pid)
        time.sleep(max(0.0, window[1] - time.monotonic()))
        gen1, cpu1 = _generation_tokens(url), _cpu_seconds(pid)
        tallies = [f.result() for f in futures]
    total = {k: sum(t[k] for t in tallies) for k in ("tokens", "requests", "errors")}
    return {
        **asdict(spec),
        "requests_per_s": round(total["requests"] / spec.duration_s, 1),
        "streamed_tokens_per_s": round(total["tokens"] / spec.duration_s),
        "server_tokens_per_s": round((gen1 - gen0) / spec.duration_s),
        "server_cpu_util": round((cpu1 - cpu0) / spec.duration_s, 2),
        "server_tokens_per_cpu_s": round((gen1 - gen0) / max(cpu1 - cpu0, 1e-9)),
        "errors": total["errors"],
    }


def run_bench(spec: BenchSpec) -> dict[str, Any]:
    """Start a worker, load it, stop it; the measured rates (stable keys, JSON-ready)."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "workers.sim", "--port", str(port), "--profile", spec.profile]
    cmd += ["--speed", str(spec.speed), "--max-num-seqs", str(max(spec.concurrency, 1))]
    proc = subprocess.Popen(cmd)
    try:
        _wait_healthy(url, proc)
        return _drive(spec, url, proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
