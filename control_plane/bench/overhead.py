"""`arbiter bench overhead`: what the full path (gateway + Redis + scheduler) adds.

One run starts a private deployment (Redis, simulated workers at a high speed factor, two
scheduler replicas, recorder, gateway), then, in interleaved rounds (direct, gateway, direct,
gateway, … at each concurrency), sends the same streaming load (16 output tokens,
`include_usage`, `ignore_eos`) straight to the workers (round robin) and through the gateway.
Each concurrency reports the median over rounds of TTFT p50/p99, the added TTFT (gateway
minus direct, per round), requests/s and errors, and, from the gateway's `X-Arbiter-Timing`
stamps, the median time spent in each hop. With `flood`, a second tenant floods the same
target with as many clients again while the first is measured (fairness at work under the
deployment's policy). With `gateways`, the deployment runs that many gateway processes behind
its port; with `litellm_venv`, a LiteLLM proxy (`overhead_litellm.py`) on the same workers is
measured in the same rounds, after the gateway. Results are printed and written as JSON.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Coroutine, Iterator
from dataclasses import asdict, dataclass, field
from importlib.util import find_spec
from pathlib import Path
from typing import Any, TypeVar

from control_plane.bench.load import LoadResult, Target, run_load
from control_plane.bench.overhead_cpu import (
    CpuMeter,
    measured_pids,
    per_request_ms,
    switches_per_request,
)
from control_plane.bench.overhead_litellm import LiteLLMProxy, ratios
from control_plane.bench.overhead_profile import Profiler
from control_plane.bench.overhead_settle import settle
from control_plane.bench.overhead_stats import over_rounds, round_row
from control_plane.up.deploy import Deployment, UpOptions, _free_port

BODY: dict[str, Any] = {
    "model": "tiny-llama",
    "prompt": "Say something short.",
    "max_tokens": 16,
    "ignore_eos": True,
    "stream": True,
    "stream_options": {"include_usage": True},
}
DEBUG = {"X-Arbiter-Debug-Timing": "1"}
T = TypeVar("T")
WARMUP = 10
"""Requests each round sends before its clients start (counted in the CPU per request)."""
PER_CLIENT = 16
"""Measured requests per client on average, at least: a round long enough that its p99 is
not set by the few requests of its first and last moments."""


@dataclass
class OverheadPlan:
    """What one `arbiter bench overhead` run measures."""

    concurrencies: list[int] = field(default_factory=lambda: [1, 64, 128])
    requests: int = 400
    rounds: int = 3
    workers: int = 2
    speed: float = 1000.0
    policy: str = "vtc"
    flood: bool = False
    profile_dir: Path | None = None
    profile_concurrency: int = 64
    fast_path: bool = True
    gateways: int = 1
    redis_fsync: str = "everysec"
    litellm_venv: Path | None = None
    litellm_workers: int = field(default_factory=lambda: os.cpu_count() or 1)


@dataclass
class _Targets:
    direct: list[Target]
    gateway: list[Target]
    flood: dict[str, list[Target]]
    redis_url: str
    cluster: str
    litellm: list[Target] = field(default_factory=list)


@contextlib.contextmanager
def scratch_dir(prefix: str) -> Iterator[Path]:
    """A temporary directory for one run's deployment, removed once the run succeeded; kept
    (with its logs, the evidence) when the run raised."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def measure(plan: OverheadPlan) -> dict[str, Any]:
    """Run the comparison; returns the JSON-ready result."""
    with scratch_dir("arb-bench-") as state:
        return _measure(plan, state)


def _measure(plan: OverheadPlan, state: Path) -> dict[str, Any]:
    tenants = ["bench", "flood"] if plan.flood else ["bench"]
    dep = Deployment(
        UpOptions(
            workers=plan.workers,
            speed=plan.speed,
            port=_free_port(),
            console=False,
            database_url=f"sqlite:///{state / 'bench.db'}",
            state_dir=state,
            tenants=tenants,
            policy=plan.policy,
            gateways=plan.gateways,
            redis_fsync=plan.redis_fsync,
        ),
        say=lambda _line: None,
    )
    os.environ["ARBITER_FAST_PATH"] = "1" if plan.fast_path else "0"  # the children inherit it
    load_before = os.getloadavg()
    litellm: LiteLLMProxy | None = None
    try:
        info = dep.start()
        targets = _targets(info, dep.opts.cluster)
        if plan.litellm_venv is not None:
            litellm = _start_litellm(plan, info, targets, state)
        rounds: dict[int, list[dict[str, Any]]] = {c: [] for c in plan.concurrencies}
        profile: dict[str, Any] | None = None
        for r in range(plan.rounds):
            for c in plan.concurrencies:
                profiler = None
                pids = measured_pids(dep.supervisor.status())
                if plan.profile_dir is not None and r == 0 and c == plan.profile_concurrency:
                    profiler = Profiler(plan.profile_dir, pids, info["redis_url"])
                rounds[c].append(_one_round(plan, targets, c, profiler, CpuMeter(pids)))
                if profiler is not None:
                    profile = profiler.stop()
                    profile["requests"] = rounds[c][-1]["gateway"]["sent"]
        rows = [{"concurrency": c, **over_rounds(rs), "rounds": rs} for c, rs in rounds.items()]
        return {
            "plan": {
                **asdict(plan),
                "profile_dir": str(plan.profile_dir or ""),
                "litellm_venv": str(plan.litellm_venv or ""),
            },
            "body": BODY,
            "loadavg_before": list(load_before),
            "loadavg_after": list(os.getloadavg()),
            "cpus": os.cpu_count(),
            "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "rows": rows,
            "max_sustained_rps": max(float(r["gateway"]["rps"]) for r in rows),
            "profile": profile,
            "litellm": None if litellm is None else {**litellm.describe(), "ratios": ratios(rows)},
        }
    finally:
        if litellm is not None:
            litellm.stop()
        dep.stop()


def _start_litellm(
    plan: OverheadPlan, info: dict[str, Any], targets: _Targets, state: Path
) -> LiteLLMProxy:
    """LiteLLM on the deployment's workers, added to the measured (and flooding) targets."""
    assert plan.litellm_venv is not None
    proxy = LiteLLMProxy(
        plan.litellm_venv,
        list(info["workers"]),
        str(BODY["model"]),
        processes=plan.litellm_workers,
        port=_free_port(),
    )
    proxy.start(state)
    targets.litellm = [proxy.target()]
    if targets.flood:
        targets.flood["litellm"] = [proxy.target()]
    return proxy


def _targets(info: dict[str, Any], cluster: str) -> _Targets:
    keys = info["tenants"]
    direct = [Target(f"{w}/v1/completions") for w in info["workers"]]
    gw = f"{info['gateway_url']}/v1/completions"
    flood: dict[str, list[Target]] = {}
    if "flood" in keys:
        flood = {
            "direct": direct,
            "gateway": [Target(gw, {"Authorization": f"Bearer {keys['flood']}"})],
        }
    bench = [Target(gw, {"Authorization": f"Bearer {keys['bench']}", **DEBUG})]
    return _Targets(direct, bench, flood, redis_url=info["redis_url"], cluster=cluster)


def _one_round(
    plan: OverheadPlan, targets: _Targets, c: int, profiler: Profiler | None, meter: CpuMeter
) -> dict[str, Any]:
    n = max(plan.requests, PER_CLIENT * c)
    results: dict[str, LoadResult] = {}
    measured = [("direct", targets.direct), ("gateway", targets.gateway)]
    if targets.litellm:
        measured.append(("litellm", targets.litellm))
    cpu: dict[str, float] = {}
    settled_s: float | None = None
    for name, dest in measured:
        if name == "gateway":
            if profiler is not None:
                profiler.start()
            meter.start()
        results[name] = _on_fast_loop(_measured(dest, targets.flood.get(name), c, n))
        if name == "gateway":
            # the round's deferred work (rows, completions) is the round's, not the next one's
            settled_s = _settled(targets)
            cpu = meter.stop()
    row = round_row(results)
    row["gateway"]["sent"] = results["gateway"].sent
    row["gateway"]["settle_ms"] = None if settled_s is None else settled_s * 1e3
    # not with a flood (its requests share the CPU) nor under py-spy (it slows what it samples)
    if cpu and not plan.flood and profiler is None:
        sent = results["gateway"].sent
        row["gateway"]["cpu_ms_per_request"] = per_request_ms(cpu, sent)
        waits, preempted = switches_per_request(meter.spent, sent)
        row["gateway"]["waits_per_request"] = waits
        row["gateway"]["preempted_per_request"] = preempted
    return row


def _settled(targets: _Targets) -> float | None:
    """Seconds the deployment took to settle; None (and a warning) when a reader did not
    catch up in time: the round is kept, its CPU figures then miss that reader's backlog."""
    try:
        return _on_fast_loop(settle(targets.redis_url, targets.cluster))
    except TimeoutError:
        print("warning: an events reader did not catch up within the settle limit", file=sys.stderr)
        return None


def _on_fast_loop(work: Coroutine[Any, Any, T]) -> T:
    """The load generator on uvloop, as Arbiter's services run: it shares the cores with
    what it measures, so the less it costs per request the less it skews both targets."""
    if find_spec("uvloop") is None:
        return asyncio.run(work)
    import uvloop

    return uvloop.run(work)


async def _measured(dest: list[Target], flood: list[Target] | None, c: int, n: int) -> LoadResult:
    """The measured load; with `flood`, another tenant's c clients run beside it."""
    if not flood:
        return await run_load(dest, concurrency=c, requests=n, body=BODY, warmup=WARMUP)
    background = asyncio.create_task(
        run_load(flood, concurrency=c, requests=1_000_000_000, body=BODY, warmup=0)
    )
    try:
        return await run_load(dest, concurrency=c, requests=n, body=BODY, warmup=WARMUP)
    finally:
        background.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await background


def write(result: dict[str, Any], out: Path | None) -> None:
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2))
