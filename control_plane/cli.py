"""The `arbiter` command (Typer + rich): the processes at the top level, the rest in groups.

`arbiter gateway|scheduler|recorder|up` run the parts of a deployment (`arbiter migrate` readies
its database first); `arbiter sim …` simulates scenarios in virtual time (and replays them
live), `arbiter bench …` measures a real deployment, `arbiter worker …` runs workers, `arbiter
admin …` administers tenants, keys and reports from the database. Each group's commands are
registered by the module that owns them, imported explicitly: a missing dependency fails
loudly. The flat names of the previous release (`simulate`, `bench-soak`, `tenants`, …) remain
as hidden aliases for one release.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Coroutine
from importlib.util import find_spec
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.panel import Panel

from control_plane.core.cli_errors import USER_ERRORS, UserErrorGroup, positive, user_errors
from control_plane.settings import SettingsError
from control_plane.sim.yaml_file import ScenarioError
from storage.errors import InvalidValueError, StorageError


class _Arbiter(UserErrorGroup):
    """`arbiter`: an operator's mistake anywhere below is one line and exit status 2."""

    ERRORS = (*USER_ERRORS, ScenarioError, SettingsError, InvalidValueError)
    SERVICES = frozenset({"gateway", "scheduler", "recorder"})


app = typer.Typer(
    cls=_Arbiter,
    name="arbiter",
    help="Arbiter: fair, SLO-aware scheduling for shared LLM serving.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)
worker_app = typer.Typer(
    help="Run a worker: simulated vLLM, or a supervised real vLLM server.", no_args_is_help=True
)
sim_app = typer.Typer(
    help="Simulate scenarios in virtual time, replay them live and compare.", no_args_is_help=True
)
bench_app = typer.Typer(
    help="Measure a real deployment: added latency, faults, long soaks.", no_args_is_help=True
)
admin_app = typer.Typer(
    help="Administer tenants, API keys and reports straight from the database.",
    no_args_is_help=True,
)
app.add_typer(worker_app, name="worker")
app.add_typer(sim_app, name="sim")
app.add_typer(bench_app, name="bench")
app.add_typer(admin_app, name="admin")
Opt = typer.Option


def _settings(**overrides: Any) -> Any:
    """Settings from the environment and flags; a bad value exits 2 with one line per problem."""
    from control_plane.settings import load_settings

    with user_errors(errors=(SettingsError,)):
        return load_settings(**overrides)


def _run_fast(main: Coroutine[Any, Any, None]) -> None:
    """Run a long-lived service on uvloop (a dependency, but absent on Windows), its imported
    heap frozen out of the collector's way (`control_plane.gc_freeze`)."""
    from control_plane.gc_freeze import freeze_startup_heap

    freeze_startup_heap()
    if find_spec("uvloop") is None:
        asyncio.run(main)
        return
    import uvloop

    uvloop.run(main)


def _run_service(main: Coroutine[Any, Any, None]) -> None:
    """`_run_fast`, a storage error it cannot get past (a migration that fails) being one
    line and exit 1, not a traceback."""
    try:
        _run_fast(main)
    except StorageError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None


def _logging(level: str) -> None:
    logging.basicConfig(
        level=level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s"
    )


@app.command()
def gateway(
    host: Annotated[str | None, Opt(help="Interface (default ARBITER_HOST).")] = None,
    port: Annotated[int | None, Opt(help="Port (default ARBITER_PORT or 8080).")] = None,
    redis_url: Annotated[str | None, Opt(help="Redis URL (ARBITER_REDIS_URL).")] = None,
    database_url: Annotated[str | None, Opt(help="SQL URL (ARBITER_DATABASE_URL).")] = None,
    processes: Annotated[
        int | None,
        Opt(help="Gateway processes sharing the port, supervised (ARBITER_GATEWAYS; 1)."),
    ] = None,
    reuse_port: Annotated[
        bool, Opt(help="Share the port with other gateway processes (SO_REUSEPORT).")
    ] = False,
    status_port: Annotated[
        int | None, Opt(help="Also serve on this port of its own (health, one process).")
    ] = None,
    id_prefix: Annotated[
        str | None,
        Opt(help="Gateway id = PREFIX-<random>, fresh at every start (ARBITER_GATEWAY_ID)."),
    ] = None,
) -> None:
    """Serve the tenant API (OpenAI-compatible), the admin API and /metrics."""
    import os

    from control_plane.up.gateways import processes_from

    settings = _settings(host=host, port=port, redis_url=redis_url, database_url=database_url)
    with user_errors():
        n = processes_from(processes, os.environ)
    _logging(settings.log_level)
    if n > 1:
        _gateway_group(n, settings, redis_url, database_url)
        return
    from control_plane.api.app import create_app
    from control_plane.gateway.serving import PortUnavailable, serve

    # a fresh id at every start, also under a fixed ARBITER_GATEWAY_ID (compose, a pod's
    # name): a restarted process is a new replica, so the leader releases what the dead one held
    prefix = id_prefix or settings.gateway_id
    if prefix:
        settings = settings.model_copy(update={"gateway_id": f"{prefix}-{os.urandom(4).hex()}"})
    try:
        app = create_app(settings, freeze_heap=True)
        serve(app, settings, reuse_port=reuse_port, status_port=status_port)
    except PortUnavailable as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None


def _gateway_group(n: int, settings: Any, redis_url: str | None, db_url: str | None) -> None:
    """`arbiter gateway --processes N`: N gateways on one port, supervised until SIGTERM."""
    import os

    from control_plane.up.gateways import GatewayGroup, PortTaken, run_group

    flags = [
        *(("--redis-url", redis_url) if redis_url else ()),
        *(("--database-url", db_url) if db_url else ()),
    ]
    token = os.environ.get("ARBITER_ADMIN_TOKEN")
    group = GatewayGroup(
        n,
        settings.host,
        settings.port,
        {"ARBITER_ADMIN_TOKEN": token} if token else {},
        id_prefix=settings.gateway_id or "gw",
        args=tuple(flags),
    )
    try:
        run_group(
            group,
            say=lambda line: logging.getLogger("arbiter.gateway").warning(line),
            grace_s=settings.shutdown_grace_s + 10.0,  # its drain, then its lifespan's shutdown
        )
    except PortTaken as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None


@app.command()
def scheduler(
    with_recorder: Annotated[bool, Opt(help="Also run the recorder in this process.")] = False,
    port: Annotated[int | None, Opt(help="Status port (ARBITER_SCHEDULER_PORT).")] = None,
    redis_url: Annotated[str | None, Opt(help="Redis URL (ARBITER_REDIS_URL).")] = None,
    policy: Annotated[str | None, Opt(help="Policy until the `policy` knob is set.")] = None,
) -> None:
    """Run a scheduler replica: leader when it holds the lease, standby otherwise."""
    from control_plane.policies.registry import UnknownPolicyError, policy_class
    from control_plane.scheduler.main import run_scheduler

    settings = _settings(scheduler_port=port, redis_url=redis_url, policy=policy)
    try:
        policy_class(settings.policy)
    except UnknownPolicyError as exc:
        where = "--policy" if policy is not None else "ARBITER_POLICY"
        typer.echo(f"error: {where}: {exc}", err=True)
        raise typer.Exit(2) from None
    _logging(settings.log_level)
    _run_service(run_scheduler(settings, with_recorder=with_recorder))


@app.command()
def recorder(
    redis_url: Annotated[str | None, Opt(help="Redis URL (ARBITER_REDIS_URL).")] = None,
    database_url: Annotated[str | None, Opt(help="SQL URL (ARBITER_DATABASE_URL).")] = None,
) -> None:
    """Write completion events to SQL (request rows and fairness rollups)."""
    from control_plane.recorder.main import run_recorder

    settings = _settings(redis_url=redis_url, database_url=database_url)
    _logging(settings.log_level)
    _run_service(run_recorder(settings))


@app.command()
def up(
    workers: Annotated[int, Opt(min=1, help="Number of workers.")] = 2,
    worker_kind: Annotated[str, Opt(help="sim or vllm.")] = "sim",
    profile: Annotated[str, Opt(help="Latency profile of simulated workers.")] = "tiny-cpu",
    speed: Annotated[
        float, Opt(callback=positive, help="Speed factor of simulated workers.")
    ] = 1.0,
    port: Annotated[int, Opt(min=1, max=65535, help="Gateway port.")] = 8080,
    console: Annotated[bool, Opt(help="Start the operator console.")] = True,
    console_port: Annotated[int, Opt(min=1, max=65535, help="Console port.")] = 8501,
    database_url: Annotated[str, Opt(help="SQL URL.")] = "sqlite:///./arbiter.db",
    state_dir: Annotated[Path, Opt(help="Where logs, Redis data and up.json go.")] = Path(
        ".arbiter"
    ),
    policy: Annotated[str, Opt(help="Initial scheduling policy.")] = "vtc",
    vllm_model: Annotated[str | None, Opt(help="Model dir for --worker-kind vllm.")] = None,
    vllm_python: Annotated[str | None, Opt(help="vLLM's Python interpreter.")] = None,
    tenant: Annotated[list[str] | None, Opt(help="Demo tenant to create (repeat).")] = None,
    max_num_seqs: Annotated[int | None, Opt(min=1, help="Batch size of simulated workers.")] = None,
    kv_tokens: Annotated[
        int | None, Opt(min=16, help="KV cache capacity (tokens) of simulated workers.")
    ] = None,
    schedulers: Annotated[
        int, Opt(min=1, help="Scheduler replicas (one leads, the others stand by).")
    ] = 2,
    fast_path: Annotated[
        bool | None,
        Opt(
            "--fast-path/--no-fast-path",
            help="Gateways take idle worker slots the leader lends (default: ARBITER_FAST_PATH,"
            " on when unset).",
        ),
    ] = None,
    gateways: Annotated[
        int, Opt(help="Gateway processes sharing the gateway port (SO_REUSEPORT).")
    ] = 1,
    redis_fsync: Annotated[
        str, Opt(help="Redis AOF fsync: everysec, or always (an fsync before every reply).")
    ] = "everysec",
    log_max_mb: Annotated[
        int, Opt(min=0, help="Rotate each child's log past this size, keeping 3 (0: never).")
    ] = 64,
) -> None:
    """Run everything on this machine until Ctrl-C; any part that exits is restarted."""
    import os
    import signal
    import time

    from control_plane.up.checks import option_problems
    from control_plane.up.deploy import Deployment, UpOptions
    from control_plane.up.errors import UpError
    from control_plane.up.log_rotation import MIB, LogLimit
    from control_plane.up.supervisor import STOP_SIGNALS, catch_stop_signals

    out = Console()
    opts = UpOptions(
        workers=workers,
        worker_kind=worker_kind,
        profile=profile,
        speed=speed,
        port=port,
        console=console,
        console_port=console_port,
        database_url=database_url,
        state_dir=state_dir,
        policy=policy,
        vllm_model=vllm_model,
        vllm_python=vllm_python,
        tenants=tenant or ["acme", "globex"],
        max_num_seqs=max_num_seqs,
        kv_tokens=kv_tokens,
        schedulers=schedulers,
        gateways=gateways,
        redis_fsync=redis_fsync,
        logs=LogLimit(log_max_mb * MIB) if log_max_mb else None,
    )
    if fast_path is not None:  # every child inherits it (docs/architecture.md §2, "The fast lane")
        os.environ["ARBITER_FAST_PATH"] = "1" if fast_path else "0"
    _settings(database_url=database_url)  # the children's settings, checked before any starts
    _exit_on_problems(option_problems(opts))
    dep = Deployment(
        opts,
        say=lambda line: out.print(
            f"{time.strftime('%H:%M:%S')} {line}", markup=False, highlight=False, soft_wrap=True
        ),
    )
    # SIGTERM and SIGHUP stop the deployment exactly like Ctrl-C, even while it is starting
    catch_stop_signals()
    try:
        with out.status("starting Redis, workers, schedulers, gateway, console…"):
            info = dep.start()
        out.print(_up_banner(info, state_dir / "up.json"))
        dep.watch()
    except KeyboardInterrupt:
        pass
    except (UpError, StorageError) as exc:
        out.print(f"[red]arbiter up failed:[/red] {exc}")
        raise typer.Exit(1) from exc
    finally:
        for sig in (signal.SIGINT, *STOP_SIGNALS):
            signal.signal(sig, signal.SIG_IGN)  # a second Ctrl-C must not orphan children
        with out.status("stopping…"):
            dep.stop()


def _exit_on_problems(lines: list[str]) -> None:
    for line in lines:
        typer.echo(f"error: {' '.join(line.split())}", err=True)
    if lines:
        raise typer.Exit(2)


def _up_banner(info: dict[str, Any], up_json: Path) -> Panel:
    """What `arbiter up` prints once everything answers; the admin token only by its start."""
    keys = "\n".join(f"  {name}: {key}" for name, key in info["tenants"].items())
    token = f"{info['admin_token'][:4]}… (in full in {up_json}, readable by you only)"
    return Panel(
        f"gateway   {info['gateway_url']}/v1\nconsole   {info['console_url'] or '(off)'}\n"
        f"admin     {token}\nworkers   {', '.join(info['workers'])}\n"
        f"API keys\n{keys}\n\nCtrl-C stops everything; a part that exits is restarted",
        title="Arbiter is up",
    )


GROUPS = ("worker", "sim", "bench", "admin", "migrate")
_NEEDED = {
    **{"gateway": (), "scheduler": (), "recorder": (), "up": ()},
    **{g: (g,) for g in GROUPS},
    "prune-history": ("migrate",),
}


def _register(command: str | None = None) -> None:
    """Register what `command` (the first word after `arbiter`) needs: nothing more for the
    processes defined here, its own group otherwise, every group for anything else (none,
    `--help`, a hidden alias, a mistake): a deployment's processes never load the simulator
    and the benchmarks (about half of `arbiter migrate`'s and a recorder's memory)."""
    wanted = _NEEDED.get(command or "", GROUPS)
    if "worker" in wanted:
        from workers.sim import cli as worker_sim_cli
        from workers.vllm import cli as vllm_cli

        worker_sim_cli.register(worker_app)
        vllm_cli.register(worker_app)
    if "sim" in wanted:
        from control_plane.sim import cli as sim_cli

        sim_cli.register(sim_app, aliases=app)
    if "bench" in wanted:
        from control_plane.bench import cli as bench_cli

        bench_cli.register(bench_app, aliases=app)
    if "admin" in wanted:
        from control_plane import admin_cli

        admin_cli.register(admin_app, aliases=app)
    if "migrate" in wanted:
        from control_plane import schema_cli

        schema_cli.register(app)


def main() -> None:
    """Console-script entry point; a child of `arbiter up` ends with it (`up/tether.py`)."""
    from control_plane.up.tether import watch_up_lock

    watch_up_lock()
    _register(sys.argv[1] if len(sys.argv) > 1 else None)
    app()
