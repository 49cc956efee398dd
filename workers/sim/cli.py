"""``arbiter worker sim`` (run a simulated vLLM server) and ``arbiter worker sim-bench``."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError

from workers.engine.profile import load_profile
from workers.sim.config import SimConfig

Opt = typer.Option
FLAGS = {"served_model_name": "--model"}
"""Config fields whose flag is not the field's name in kebab case."""
LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")
CLIENTS = ("httpx", "raw")


def _refuse(problems: list[str]) -> None:
    """Print each problem as `error: …` and exit 2; nothing when there are none."""
    for line in problems:
        typer.echo(f"error: {line}", err=True)
    if problems:
        raise typer.Exit(2)


def _profile_problems(profile: str) -> list[str]:
    try:
        load_profile(profile)
    except ValueError as exc:  # an unknown name or a bad profile file: the message says which
        return [f"--profile: {' '.join(str(exc).split())}"]
    return []


def _bench_problems(
    speed: float,
    duration: float,
    concurrency: int,
    max_tokens: int,
    prompt_words: int,
    clients: int,
    client: str,
) -> list[str]:
    """One line per bad `sim-bench` flag (each failed only after a worker had started)."""
    lines = [
        f"{flag}: must be a finite number > 0, got {value}"
        for flag, value in (("--speed", speed), ("--duration", duration))
        if not (math.isfinite(value) and value > 0)
    ]
    counts = (
        ("--concurrency", concurrency),
        ("--max-tokens", max_tokens),
        ("--prompt-words", prompt_words),
        ("--clients", clients),
    )
    lines += [f"{flag}: must be at least 1, got {value}" for flag, value in counts if value < 1]
    if client not in CLIENTS:
        lines.append(f"--client: expected one of {', '.join(CLIENTS)}, got {client!r}")
    return lines


def _config(**fields: object) -> SimConfig:
    """The worker's config; a bad flag is one line naming it and exit status 2."""
    try:
        config = SimConfig.model_validate(fields)
    except ValidationError as exc:
        for e in exc.errors():
            name = str(e["loc"][0]) if e["loc"] else ""
            flag = FLAGS.get(name, "--" + name.replace("_", "-"))
            typer.echo(f"error: {flag}: {e['msg']}", err=True)
        raise typer.Exit(2) from None
    _refuse(_profile_problems(config.profile))
    return config


def sim(
    port: Annotated[int, Opt(help="TCP port to listen on.")],
    host: Annotated[str, Opt(help="Interface to bind.")] = "127.0.0.1",
    profile: Annotated[str, Opt(help="Latency profile name or YAML path.")] = "tiny-cpu",
    speed: Annotated[float, Opt(help="Run X times faster than the profile.")] = 1.0,
    seed: Annotated[int, Opt(help="Seed of output lengths, jitter and faults.")] = 0,
    model: Annotated[str | None, Opt(help="Served model name (default: the profile's).")] = None,
    max_model_len: Annotated[int | None, Opt(help="Context length override.")] = None,
    max_num_seqs: Annotated[int | None, Opt(help="Engine batch size override.")] = None,
    max_num_batched_tokens: Annotated[int | None, Opt(help="Token budget per step.")] = None,
    kv_tokens: Annotated[int | None, Opt(help="KV cache capacity in tokens.")] = None,
    scheduling_policy: Annotated[str, Opt(help="fcfs or priority (vLLM's flag).")] = "fcfs",
    fail_rate: Annotated[float, Opt(help="Fraction of requests answered 500.")] = 0.0,
    die_after_tokens: Annotated[int | None, Opt(help="Exit after N tokens (0: prefill).")] = None,
    stall_after_tokens: Annotated[int | None, Opt(help="Stall after N streamed tokens.")] = None,
    stall_s: Annotated[float, Opt(help="Length of the stall in seconds.")] = 0.0,
    log_level: Annotated[str, Opt(help="uvicorn log level.")] = "warning",
) -> None:
    """Serve vLLM's OpenAI API from the engine model (no GPU, no model weights)."""
    import uvicorn

    from workers.sim.app import create_app

    if log_level not in LOG_LEVELS:
        _refuse([f"--log-level: expected one of {', '.join(LOG_LEVELS)}, got {log_level!r}"])
    if not 0 <= port <= 65535:
        _refuse([f"--port: must be a TCP port (0 to 65535), got {port}"])

    config = _config(
        profile=profile,
        speed=speed,
        seed=seed,
        served_model_name=model,
        max_model_len=max_model_len,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens,
        kv_tokens=kv_tokens,
        scheduling_policy=scheduling_policy,
        fail_rate=fail_rate,
        die_after_tokens=die_after_tokens,
        stall_after_tokens=stall_after_tokens,
        stall_s=stall_s,
    )
    app = create_app(config)
    w = app.worker
    typer.echo(
        f"simulated vLLM worker: model {w.served_model!r}, profile {w.profile.name!r}, "
        f"speed {speed:g}, http://{host}:{port}",
        err=True,
    )
    uvicorn.run(
        app,
        host=host,
        port=port,
        log_level=log_level,
        access_log=False,
        timeout_graceful_shutdown=5,
    )


def sim_bench(
    profile: Annotated[str, Opt(help="Latency profile of the worker.")] = "tiny-cpu",
    speed: Annotated[float, Opt(help="Speed factor of the worker.")] = 1000.0,
    concurrency: Annotated[int, Opt(help="Concurrent streaming clients.")] = 64,
    duration: Annotated[float, Opt(help="Seconds of load after warm-up.")] = 10.0,
    max_tokens: Annotated[int, Opt(help="Output tokens per request (ignore_eos).")] = 256,
    prompt_words: Annotated[int, Opt(help="Words in each prompt.")] = 32,
    clients: Annotated[int, Opt(help="Client processes driving the load.")] = 1,
    client: Annotated[str, Opt(help="Load generator: httpx or raw (asyncio streams).")] = "httpx",
    out: Annotated[Path | None, Opt(help="Write the results as JSON here.")] = None,
) -> None:
    """Measure what one simulated worker process sustains (requests/s, streamed tokens/s)."""
    from workers.sim.bench import BenchSpec, run_bench

    _refuse(
        _bench_problems(speed, duration, concurrency, max_tokens, prompt_words, clients, client)
        + ([f"--out: {out} is a directory"] if out is not None and out.is_dir() else [])
        + _profile_problems(profile)
    )

    spec = BenchSpec(
        profile=profile,
        speed=speed,
        concurrency=concurrency,
        duration_s=duration,
        max_tokens=max_tokens,
        prompt_words=prompt_words,
        clients=clients,
        client=client,
    )
    result = run_bench(spec)
    for key, value in result.items():
        typer.echo(f"{key:>24}: {value}")
    if out is not None:
        import json

        out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


def register(worker_app: typer.Typer) -> None:
    """Add ``sim`` and ``sim-bench`` to the ``arbiter worker`` command group."""
    worker_app.command("sim")(sim)
    worker_app.command("sim-bench")(sim_bench)
