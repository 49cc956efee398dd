"""`arbiter sim run|speed|capacity|compare|scenarios|replay`.

`register(group)` adds the commands to the `arbiter sim` group. Results are written as
`results.json` (+ `report.html`); with several scenario files, one sub-directory per scenario.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import httpx
import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    TaskID,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from control_plane.core.cli_errors import OptionError, positive, user_errors
from control_plane.sim import speed_bench
from control_plane.sim.cli_args import (
    parse_params,
    parse_policies,
    plugin_choice,
)
from control_plane.sim.cli_inputs import (
    check_output_file,
    check_outputs,
    check_plugins,
    live_scenarios,
    replay_inputs,
)
from control_plane.sim.cluster import unit_factors
from control_plane.sim.live_report import live_document
from control_plane.sim.report import write_report, write_results
from control_plane.sim.runner import PluginChoice, results_document, run_policy
from control_plane.sim.scenario import Scenario, list_scenarios, load_scenario
from control_plane.sim.setup import PolicySpec, build_setup
from control_plane.sim.workload import build_workload
from control_plane.sim.yaml_file import ScenarioError

Opt = typer.Option
console = Console(stderr=True)


def _scenario(file: str) -> Scenario:
    """The scenario, or one line on stderr naming the file and the field, and exit status 2."""
    try:
        return load_scenario(file)
    except ScenarioError as exc:
        console.print(f"[red]error:[/red] {exc}", highlight=False, markup=True, soft_wrap=True)
        raise typer.Exit(2) from None


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        TimeElapsedColumn(),
        console=console,
    )


def simulate(
    files: Annotated[list[str], typer.Argument(help="Scenario files or shipped names.")],
    policy: Annotated[list[str], Opt("--policy", "-p", help="NAME or LABEL=NAME; repeat.")],
    out: Annotated[Path, Opt(help="Output directory.")],
    param: Annotated[
        list[str] | None, Opt(help="LABEL.KEY=VALUE (also admission./placement.).")
    ] = None,
    seed: Annotated[int | None, Opt(help="Override the scenario seed.")] = None,
    duration: Annotated[
        float | None, Opt(callback=positive, help="Override duration_s (seconds).")
    ] = None,
    admission: Annotated[str | None, Opt(help="Admission plug-in (default: scenario's).")] = None,
    placement: Annotated[str | None, Opt(help="Placement plug-in (default: scenario's).")] = None,
    report: Annotated[bool, Opt(help="Also write report.html.")] = True,
    live_speed: Annotated[
        float | None,
        Opt(help="Model a live `arbiter sim replay --speed X` (scheduler's wall-clock times)."),
    ] = None,
) -> None:
    """Simulate scenarios under policies in virtual time; write results.json and report.html."""
    with user_errors():
        params = parse_params(param or [])
        specs = parse_policies(policy, params)
        plugins = plugin_choice(admission, placement, params)
    chosen = [_scenario(file).with_overrides(seed, duration) for file in files]
    with user_errors():
        if live_speed is not None:
            chosen = live_scenarios(chosen, live_speed)
        check_outputs(chosen, out)
        check_plugins(chosen, plugins)
    for scenario in chosen:
        _check_runs(scenario, specs, plugins)
    workloads = [build_workload(scenario) for scenario in chosen]  # a bad trace: before any run
    for scenario, workload in zip(chosen, workloads, strict=True):
        runs = []
        end = scenario.duration_s + scenario.drain_s
        with _progress() as bar:
            for spec in specs:
                task = bar.add_task(f"{scenario.name} · {spec.label}", total=end)

                def advance(t: float, task_id: TaskID = task) -> None:
                    bar.update(task_id, completed=t)

                runs.append(run_policy(scenario, spec, workload, plugins=plugins, progress=advance))
                bar.update(task, completed=end)
        doc = results_document(scenario, runs)
        target = out if len(chosen) == 1 else out / scenario.name
        path = write_results(doc, target)
        if report:
            write_report(doc, target)
        _print_summary(scenario.name, doc["results"])
        console.print(f"wrote {path}")


def _check_runs(scenario: Scenario, specs: list[PolicySpec], plugins: PluginChoice) -> None:
    """Build every run's scheduler before any runs: a bad policy, plug-in or param exits 2 now,
    not after the runs before it."""
    for spec in specs:
        with user_errors(f"--policy {spec.label} on {scenario.name}"):
            build_setup(
                scenario,
                spec,
                admission=plugins.admission,
                admission_params=plugins.admission_params,
                placement=plugins.placement,
                placement_params=plugins.placement_params,
            )


def _print_summary(name: str, results: dict[str, dict[str, object]]) -> None:
    keys = ("slo_violation_rate", "e2e_p99_s", "tokens_per_s", "mean_safi", "jain_safi")
    table = Table(title=name)
    for column in ("policy", *keys):
        table.add_column(column, justify="right")
    for label, res in results.items():
        row = [res.get(k) for k in keys]
        table.add_row(label, *("—" if v is None else f"{v:.4g}" for v in row))
    console.print(table)


def simulate_bench(
    files: Annotated[list[str] | None, typer.Argument(help="Scenarios (default: a set).")] = None,
    policy: Annotated[list[str] | None, Opt("--policy", "-p")] = None,
    out: Annotated[Path, Opt(help="JSON file to write.")] = Path("out/sim-speed.json"),
    duration: Annotated[float | None, Opt(callback=positive, help="Override duration_s.")] = None,
    split: Annotated[
        bool, Opt("--split", help="Also print where each run's CPU went, phase by phase.")
    ] = False,
) -> None:
    """Print simulated requests per CPU-minute and write them as JSON."""
    # every scenario, trace and policy checked before the first run, not after the runs before it
    chosen = [
        _scenario(file).with_overrides(duration_s=duration)
        for file in files or speed_bench.DEFAULT_SCENARIOS
    ]
    names = policy or list(speed_bench.DEFAULT_POLICIES)
    with user_errors():
        check_output_file(out)
    for scenario in chosen:
        _check_runs(scenario, [PolicySpec(name, name) for name in names], PluginChoice())
    workloads = [(scenario, build_workload(scenario)) for scenario in chosen]
    samples = speed_bench.measure(workloads, names, split)
    table = Table(title="simulator speed")
    for column in ("scenario", "policy", "requests", "cpu s", "requests / CPU-minute"):
        table.add_column(column, justify="right")
    for s in samples:
        table.add_row(
            s.scenario,
            s.policy,
            str(s.requests),
            f"{s.cpu_s:.2f}",
            f"{s.requests_per_cpu_minute:,.0f}",
        )
    doc = speed_bench.report(samples)
    Console().print(table)
    Console().print(f"total: {doc['total']['requests_per_cpu_minute']:,.0f} requests / CPU-minute")
    if split:
        _print_phases(samples)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")


def _print_phases(samples: list[speed_bench.SpeedSample]) -> None:
    for sample in samples:
        table = Table(title=f"{sample.scenario} / {sample.policy}: CPU by phase")
        for column in ("phase", "cpu s", "ms / request", "µs / output token", "share"):
            table.add_column(column, justify="right")
        for row in speed_bench.phase_rows(sample):
            table.add_row(
                row["phase"],
                f"{row['cpu_s']:.2f}",
                _number(row["ms_per_request"], ".3f"),
                _number(row["us_per_output_token"], ".2f"),
                _number(row["share"], ".0%"),
            )
        Console().print(table)
    Console().print(
        f"(500,000 requests / CPU-minute leaves {60 / 500_000 * 1e3:.3f} ms per request)"
    )


def _number(value: float | None, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def simulate_capacity(
    files: Annotated[list[str], typer.Argument(help="Scenario files or shipped names.")],
) -> None:
    """Offered load against measured pool capacity per model (how scenarios are calibrated)."""
    from control_plane.sim.capacity import pool_loads

    table = Table(title="offered load vs capacity")
    for column in (
        "scenario",
        "model",
        "workers",
        "mean in/out",
        "offered rps",
        "capacity rps",
        "rho",
    ):
        table.add_column(column, justify="right")
    for file in files:
        scenario = _scenario(file)
        for p in pool_loads(scenario):
            table.add_row(
                scenario.name,
                p.model,
                str(p.workers),
                f"{p.mean_n_in:.0f}/{p.mean_n_out:.0f}",
                f"{p.offered_rps:.3f}",
                f"{p.capacity_rps:.3f}",
                f"{p.rho:.2f}",
            )
    Console().print(table)


def scenarios() -> None:
    """List the shipped scenarios."""
    for name in list_scenarios():
        description = _scenario(name).description.strip().splitlines()
        Console().print(f"[bold]{name}[/bold]  {description[0] if description else ''}")


def bench(
    file: Annotated[str, typer.Argument(help="Scenario file or shipped name.")],
    out: Annotated[Path, Opt(help="Output directory.")],
    gateway: Annotated[str | None, Opt(help="Gateway base URL.")] = None,
    api_key: Annotated[str | None, Opt(help="One API key for every tenant.")] = None,
    key: Annotated[list[str] | None, Opt(help="TENANT=API_KEY; repeat.")] = None,
    keys_file: Annotated[Path | None, Opt(exists=True, help="JSON like .arbiter/up.json.")] = None,
    speed: Annotated[
        float, Opt(callback=positive, help="Time compression (workers run --speed X).")
    ] = 1.0,
    label: Annotated[str, Opt(help="Results key (e.g. the live policy).")] = "live",
    seed: Annotated[int | None, Opt(help="Override the scenario seed.")] = None,
    duration: Annotated[float | None, Opt(callback=positive, help="Override duration_s.")] = None,
    model: Annotated[list[str] | None, Opt(help="SCENARIO_MODEL=SERVED_NAME; repeat.")] = None,
    admin_token: Annotated[
        str | None,
        Opt(
            help="Admin token to write the scenario's SLOs into tenant records (default: from "
            "--keys-file; without one, SLO-aware policies see only the tenants' records)."
        ),
    ] = None,
) -> None:
    """Replay a scenario live through the gateway's OpenAI API; same results.json shape."""
    from control_plane.sim.live_bench import LiveTarget, load_admin_token, replay
    from control_plane.sim.live_slo import tenant_slos, write_tenant_slos

    scenario = _scenario(file).with_overrides(seed, duration)
    with user_errors():
        check_outputs([scenario], out)  # before the replay: a live run's results are not lost
        base, keys, specs, models = replay_inputs(scenario, gateway, api_key, key, keys_file, model)
        admin_token = admin_token or (load_admin_token(keys_file) if keys_file else None)
    target = LiveTarget(base, keys, speed, models=models)
    slos, notes = tenant_slos(specs, speed)
    for note in notes:
        console.print(f"[yellow]{note}[/]")
    if slos and admin_token:
        with user_errors():
            try:
                asyncio.run(write_tenant_slos(base, admin_token, slos))
            except (httpx.HTTPError, RuntimeError) as exc:
                raise OptionError(f"--gateway {base}: {exc}") from None
        time.sleep(1.0)  # gateways drop cached tenant records on the change; let them
    elif slos:
        console.print("[yellow]no admin token: tenants' SLO records left as they are[/]")
    with _progress() as bar:
        task = bar.add_task(f"{scenario.name} live", total=len(specs))
        done: Callable[[object], None] = lambda _r: bar.advance(task)  # noqa: E731
        records = asyncio.run(replay(specs, unit_factors(scenario), target, done))
    doc = live_document(scenario, records, PolicySpec(label, label), speed)
    path = write_results(doc, out)
    write_report(doc, out)
    _print_summary(scenario.name, doc["results"])
    console.print(f"wrote {path}")


def simulate_compare(
    a: Annotated[Path, typer.Argument(exists=True, help="results.json (e.g. simulated).")],
    b: Annotated[Path, typer.Argument(exists=True, help="results.json (e.g. live).")],
    metric: Annotated[str, Opt(help="Per-tenant metric.")] = "queue_mean_s",
    tolerance: Annotated[
        float, Opt(min=0.0, help="Largest relative difference that agrees.")
    ] = 0.2,
    label_a: Annotated[str | None, Opt(help="Policy label in A (if several).")] = None,
    label_b: Annotated[str | None, Opt(help="Policy label in B (if several).")] = None,
) -> None:
    """Per-tenant agreement of two results files; exit 1 when a tenant differs too much."""
    from control_plane.sim.compare import compare

    try:
        docs = [json.loads(p.read_text(encoding="utf-8")) for p in (a, b)]
        diffs = compare(docs[0], docs[1], metric, label_a, label_b)
    except (ValueError, OSError) as exc:
        with user_errors(f"{a}, {b}"):
            raise OptionError(str(exc)) from None
    except (KeyError, TypeError) as exc:
        message = f"{exc} (not one policy's results.json? pick one with --label-a/--label-b)"
        with user_errors(f"{a}, {b}"):
            raise OptionError(message) from None
    table = Table(title=f"{metric}: A vs B")
    for column in ("tenant", "A", "B", "relative difference", "agrees"):
        table.add_column(column, justify="right")
    bad = 0
    for d in diffs:
        ok = d.relative is not None and d.relative <= tolerance
        bad += not ok
        rel = "—" if d.relative is None else f"{d.relative:.1%}"
        table.add_row(d.tenant, _num(d.a), _num(d.b), rel, "yes" if ok else "NO")
    Console().print(table)
    raise typer.Exit(1 if bad else 0)


def _num(value: float | None) -> str:
    return "—" if value is None else f"{value:.4g}"


def register(group: typer.Typer, aliases: typer.Typer | None = None) -> None:
    """Add `run`, `speed`, `capacity`, `compare`, `scenarios` and `replay` to `group`; the old
    flat names (`simulate`, `simulate-bench`, …) to `aliases`, hidden. The old `arbiter bench
    SCENARIO` is now `arbiter sim replay SCENARIO` (`bench` names the benchmark group)."""
    for name, old, command in (
        ("run", "simulate", simulate),
        ("speed", "simulate-bench", simulate_bench),
        ("capacity", "simulate-capacity", simulate_capacity),
        ("compare", "simulate-compare", simulate_compare),
        ("scenarios", "scenarios", scenarios),
        ("replay", None, bench),
    ):
        group.command(name)(command)
        if aliases is not None and old is not None:
            aliases.command(old, hidden=True)(command)
