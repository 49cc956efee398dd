"""`arbiter bench overhead`: the command and its tables (the run is `overhead.py`)."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

Opt = typer.Option


def bench_overhead(
    concurrency: Annotated[
        list[int] | None, Opt(help="Concurrency levels (repeat); default 1, 64, 128.")
    ] = None,
    requests: Annotated[int, Opt(help="Requests per level (at least 16 × concurrency).")] = 400,
    rounds: Annotated[int, Opt(min=1, help="Interleaved rounds (direct, gateway, …).")] = 3,
    workers: Annotated[int, Opt(help="Simulated workers.")] = 2,
    speed: Annotated[float, Opt(help="Speed factor of the workers.")] = 1000.0,
    policy: Annotated[str, Opt(help="The scheduler's policy.")] = "vtc",
    flood: Annotated[
        bool, Opt(help="A second tenant floods with as many clients while one is measured.")
    ] = False,
    profile: Annotated[
        Path | None,
        Opt(
            help="py-spy CPU profiles (collapsed stacks) and Redis commandstats of one "
            "gateway round, here."
        ),
    ] = None,
    profile_concurrency: Annotated[int, Opt(help="The profiled round's concurrency.")] = 64,
    fast_path: Annotated[
        bool, Opt(help="Deploy with the fast lane (up --fast-path), or without it.")
    ] = True,
    gateways: Annotated[int, Opt(help="Gateway processes behind the gateway's port.")] = 1,
    redis_fsync: Annotated[
        str, Opt(help="The deployment's Redis fsync (up --redis-fsync): everysec or always.")
    ] = "everysec",
    litellm_venv: Annotated[
        Path | None,
        Opt(help="Also measure a LiteLLM proxy (PATH/bin/litellm) on the same workers."),
    ] = None,
    litellm_workers: Annotated[
        int | None, Opt(help="LiteLLM's --num_workers (default: the CPU count).")
    ] = None,
    out: Annotated[Path | None, Opt(help="Write results JSON here.")] = Path(
        "out/bench-overhead.json"
    ),
) -> None:
    """Measure what gateway + Redis + scheduler add to time to first token, and max requests/s,
    in interleaved rounds, with the per-hop breakdown of the gateway's requests."""
    from control_plane.bench.flags_cli import overhead_problems, refuse
    from control_plane.bench.overhead import OverheadPlan, measure, write
    from control_plane.bench.overhead_litellm import litellm_table

    refuse(
        overhead_problems(
            concurrency, requests, workers, speed, policy, profile, profile_concurrency, out
        )
    )
    scale_out = _scale_out_checked(gateways, redis_fsync, litellm_venv, litellm_workers)
    plan = OverheadPlan(
        concurrencies=concurrency or [1, 64, 128],
        requests=requests,
        rounds=rounds,
        workers=workers,
        speed=speed,
        policy=policy,
        flood=flood,
        profile_dir=profile,
        profile_concurrency=profile_concurrency,
        fast_path=fast_path,
        **scale_out,
    )
    with ctrl_c_on_sigterm() as terminated:
        try:
            result = measure(plan)
            if terminated():  # a round that swallowed the cancellation: still interrupted
                raise KeyboardInterrupt
        except KeyboardInterrupt:
            Console(stderr=True).print(
                "interrupted: the deployment is stopped, nothing was written"
            )
            raise typer.Exit(130) from None
    console = Console(width=max(150, Console().width))
    console.print(_table(result))
    if any("hops_p50_ms" in r["gateway"] for r in result["rows"]):
        console.print(_hops(result, "p50", "medians"))
    if any("hops_p99_ms" in r["gateway"] for r in result["rows"]):
        console.print(_hops(result, "p99", "p99s"))
    if any("cpu_ms_per_request" in r["gateway"] for r in result["rows"]):
        console.print(_cpu(result))
    if any("waits_per_request" in r["gateway"] for r in result["rows"]):
        console.print(_switches(result))
    load = ", ".join(f"{x:.2f}" for x in result["loadavg_before"])
    console.print(
        f"highest sustained requests/s through the gateway: {result['max_sustained_rps']:.0f}"
        f" (median of {rounds} rounds; load average before: {load} on {result['cpus']} CPUs)"
    )
    if result["litellm"]:
        console.print(litellm_table(result))
    if result["profile"]:
        console.print(profile_line(result["profile"]))
    write(result, out)


def profile_line(profile: dict[str, Any]) -> str:
    """CPU per request of each profiled process, and where the profiles are."""
    per = profile["requests"]
    cpu = ", ".join(f"{name} {1000 * p['cpu_s'] / per:.2f}" for name, p in profile["cpu"].items())
    return (
        f"CPU-ms per request in the profiled round ({per} requests): {cpu}; "
        f"collapsed stacks, cpu.json and Redis commandstats under {profile['dir']}"
    )


def _scale_out_checked(
    gateways: int, redis_fsync: str, litellm_venv: Path | None, litellm_workers: int | None
) -> dict[str, Any]:
    """`--gateways`, `--redis-fsync` and the LiteLLM flags, checked before anything starts
    (one line, exit 2)."""
    import os

    from control_plane.bench.overhead_litellm import check_workers, litellm_exe
    from control_plane.core.cli_errors import OptionError, user_errors
    from control_plane.up.checks import REDIS_FSYNC

    with user_errors():
        if gateways < 1:
            raise OptionError(f"--gateways: must be at least 1, got {gateways}")
        if redis_fsync not in REDIS_FSYNC:
            raise OptionError(f"--redis-fsync: expected always or everysec, got {redis_fsync!r}")
        if litellm_venv is not None:
            litellm_exe(litellm_venv)
        default = os.cpu_count() or 1
        workers = check_workers(default if litellm_workers is None else litellm_workers)
    return {
        "gateways": gateways,
        "redis_fsync": redis_fsync,
        "litellm_venv": litellm_venv,
        "litellm_workers": workers,
    }


def _table(result: dict[str, Any]) -> Table:
    table = Table(title="Arbiter's added cost (streaming, 16 output tokens; medians over rounds)")
    for col in (
        "c",
        "direct TTFT p50 / p99",
        "gateway TTFT p50 / p99",
        "added p50",
        "added p99",
        "direct req/s",
        "gateway req/s",
        "errors d / g",
    ):
        table.add_column(col, justify="right")
    for row in result["rows"]:
        d, g = row["direct"], row["gateway"]
        table.add_row(
            str(row["concurrency"]),
            f"{d['ttft_p50_ms']:.2f} / {d['ttft_p99_ms']:.2f} ms",
            f"{g['ttft_p50_ms']:.2f} / {g['ttft_p99_ms']:.2f} ms",
            f"{g['added_ttft_p50_ms']:+.2f} ms",
            f"{g['added_ttft_p99_ms']:+.2f} ms",
            f"{d['rps']:.0f}",
            f"{g['rps']:.0f}",
            f"{d['errors']} / {g['errors']}",
        )
    return table


def _cpu(result: dict[str, Any]) -> Table:
    title = "CPU-ms per request through the gateway, by process (medians over rounds)"
    return _by_concurrency(result, "cpu_ms_per_request", title)


def _switches(result: dict[str, Any]) -> Table:
    """Waits (a process blocked and was woken) / preemptions per request, by process."""
    rows = [r for r in result["rows"] if "waits_per_request" in r["gateway"]]
    names = list(rows[0]["gateway"]["waits_per_request"]) if rows else []
    table = Table(title="Context switches per request, by process: waits / preemptions (medians)")
    table.add_column("c", justify="right")
    for name in names:
        table.add_column(name, justify="right")
    for row in rows:
        waits = row["gateway"]["waits_per_request"]
        preempted = row["gateway"].get("preempted_per_request", {})
        cells = (
            f"{waits.get(n, float('nan')):.2f} / {preempted.get(n, float('nan')):.2f}"
            for n in names
        )
        table.add_row(str(row["concurrency"]), *cells)
    return table


def _hops(result: dict[str, Any], stat: str, what: str) -> Table:
    title = f"Per-hop {what} through the gateway (ms; medians over rounds)"
    return _by_concurrency(result, f"hops_{stat}_ms", title)


def _by_concurrency(result: dict[str, Any], key: str, title: str) -> Table:
    """One row per concurrency of the gateway's `key` mapping (name → value), one column each."""
    rows = [r for r in result["rows"] if key in r["gateway"]]
    names = list(rows[0]["gateway"][key]) if rows else []
    table = Table(title=title)
    table.add_column("c", justify="right")
    for name in names:
        table.add_column(name, justify="right")
    for row in rows:
        values = row["gateway"][key]
        cells = (f"{values.get(n, float('nan')):.3f}" for n in names)
        table.add_row(str(row["concurrency"]), *cells)
    return table


@contextlib.contextmanager
def ctrl_c_on_sigterm() -> Iterator[Callable[[], bool]]:
    """SIGTERM (a timeout, a CI runner) ends the run like Ctrl-C, so that `measure`'s
    `finally` stops the deployment, whose processes lead their own sessions and would outlive
    a plain exit. → whether SIGTERM came.

    The handler raises SIGINT rather than KeyboardInterrupt itself: raised inside an event
    loop's callback (uvloop's transports), an exception is logged and swallowed, and the run
    went on; `asyncio.Runner` turns SIGINT into cancelling its main task instead, and
    outside a loop SIGINT's default handler raises KeyboardInterrupt. SIGINT gets that
    default handler meanwhile (a background job starts with it ignored)."""
    came = False

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        nonlocal came
        came = True
        signal.raise_signal(signal.SIGINT)

    before_term = signal.signal(signal.SIGTERM, on_sigterm)
    before_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield lambda: came
    finally:
        signal.signal(signal.SIGINT, before_int)
        signal.signal(signal.SIGTERM, before_term)
