"""`arbiter bench overhead|faults|soak|decisions|perception|hmfs-multimodal|workflows`: what
Arbiter adds to a request, evidence that a deployment survives faults and holds steady under
hours of load (these three drive a real `arbiter up` over HTTP), what one scheduling decision
costs and what tagging a prompt costs (in process), the multi-modal HMFS scenario live beside
its simulation (a real `arbiter up` with workers of three kinds), and a workflow scenario live
as closed-loop multi-agent clients beside its simulation (`workflows_cli.py`)."""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from control_plane.bench import flags_cli as flags
from control_plane.bench.overhead_cli import bench_overhead
from control_plane.bench.workflows_cli import bench_workflows

Opt = typer.Option
SOAK_TENANTS = ("acme", "globex")


def bench_faults(
    fault: Annotated[
        list[str] | None,
        Opt(
            help="Fault to inject (repeat): worker, scheduler-leader, recorder, gateway, "
            "redis-pause, redis-kill. Default: all."
        ),
    ] = None,
    requests: Annotated[int, Opt(min=1, help="Streamed chat completions per fault.")] = 200,
    concurrency: Annotated[int, Opt(min=1, help="Concurrent clients.")] = 32,
    max_tokens: Annotated[int, Opt(min=1, help="Output tokens per request.")] = 48,
    speed: Annotated[float, Opt(min=0.001, help="Speed factor of the simulated workers.")] = 0.1,
    workers: Annotated[int, Opt(min=2, help="Simulated workers.")] = 2,
    bound_s: Annotated[float, Opt(min=1, help="A request with no end after this is hung.")] = 60,
    up_arg: Annotated[
        list[str] | None, Opt(help="Extra argument for `arbiter up` (repeat).")
    ] = None,
    state_dir: Annotated[
        Path | None, Opt(help="Where each fault's deployment keeps logs and SQLite.")
    ] = None,
    out: Annotated[Path, Opt(help="Results JSON.")] = Path("out/bench-faults.json"),
) -> None:
    """Inject each fault mid-run into its own `arbiter up` and account for every request."""
    from control_plane.bench.fault_bench import passed, run_all, table, write
    from control_plane.bench.fault_run import FaultResult, Scenario
    from control_plane.bench.faults import FAULTS
    from control_plane.bench.up_process import UpConfig

    names = fault or list(FAULTS)
    unknown = [n for n in names if n not in FAULTS]
    if unknown:
        raise typer.BadParameter(f"unknown fault {unknown[0]!r}; choose from {', '.join(FAULTS)}")
    flags.refuse(
        [
            flags.number("--speed", speed, 0, above=True),
            flags.number("--bound-s", bound_s, 1),
            flags.up_args(up_arg),
            flags.directory(state_dir, "--state-dir"),
            flags.output_file(out),
        ]
    )
    sc = Scenario(
        requests=requests, concurrency=concurrency, max_tokens=max_tokens, bound_s=bound_s
    )
    config = UpConfig(workers=workers, speed=speed, extra_args=tuple(up_arg or ()))
    base = state_dir or Path(tempfile.mkdtemp(prefix="arb-faults-"))
    console = Console(width=max(150, Console().width))
    console.print(f"deployments under {base}")

    settings = {"scenario": dataclasses.asdict(sc), "up": dataclasses.asdict(config)}
    done: list[FaultResult] = []

    def progress(r: FaultResult) -> None:
        done.append(r)
        console.print(table([r]))
        write(done, out, settings)

    results = run_all(names, sc, config, base, progress)
    console.print(table(results))
    console.print(f"written to {out}")
    if not all(passed(r) for r in results):
        raise typer.Exit(1)


def bench_soak(
    minutes: Annotated[float, Opt(min=0.1, help="How long to drive the load.")] = 30.0,
    load: Annotated[float, Opt(min=0.01, max=1.5, help="Fraction of capacity to send.")] = 0.8,
    rate: Annotated[
        float | None, Opt(min=0.01, help="Requests/s to send (skips the capacity run).")
    ] = None,
    attach: Annotated[
        Path | None, Opt(help="up.json of a running `arbiter up` (default: start one).")
    ] = None,
    workers: Annotated[int, Opt(min=1, help="Simulated workers of a started deployment.")] = 2,
    speed: Annotated[float, Opt(min=0.001, help="Their speed factor.")] = 1.0,
    console: Annotated[bool, Opt(help="Start the console too (its RSS is watched).")] = True,
    max_tokens: Annotated[int, Opt(min=1, help="Output tokens per request.")] = 32,
    capacity_s: Annotated[
        float, Opt(min=10, help="Length of the capacity run (its second half counts).")
    ] = 120.0,
    sample_s: Annotated[float, Opt(min=1, help="Seconds between samples.")] = 60.0,
    warmup_s: Annotated[
        float, Opt(min=0, help="Samples before this are not compared (3 × Redis retention).")
    ] = 180.0,
    state_dir: Annotated[Path | None, Opt(help="State directory of a started deployment.")] = None,
    out: Annotated[Path, Opt(help="Results JSON.")] = Path("out/bench-soak.json"),
) -> None:
    """Hold `arbiter up` at LOAD × capacity for MINUTES; pass: < 10 % memory growth, 0 errors."""
    from control_plane.bench.soak import SoakPlan
    from control_plane.bench.soak_run import run_soak
    from control_plane.bench.up_process import UpConfig

    if attach is not None and not attach.is_file():
        raise typer.BadParameter(f"--attach: no such file {attach}")
    flags.refuse(
        [
            flags.number("--minutes", minutes, 0, above=True),
            flags.number("--capacity-s", capacity_s, 10),
            flags.number("--sample-s", sample_s, 1),
            flags.number("--warmup-s", warmup_s, 0),
            flags.number("--rate", rate, 0, above=True),
            flags.number("--speed", speed, 0, above=True),
            flags.soak_samples(minutes, sample_s, warmup_s),
            flags.up_json(attach, SOAK_TENANTS),
            flags.directory(state_dir, "--state-dir"),
            flags.output_file(out),
        ]
    )
    plan = SoakPlan(
        minutes=minutes,
        load=load,
        rate=rate,
        capacity_s=capacity_s,
        sample_s=sample_s,
        warmup_s=warmup_s,
        max_tokens=max_tokens,
    )
    config = UpConfig(workers=workers, speed=speed, tenants=SOAK_TENANTS, console=console)
    base = state_dir or Path(tempfile.mkdtemp(prefix="arb-soak-"))
    if not run_soak(plan, config, attach, base, out, Console(width=max(150, Console().width))):
        raise typer.Exit(1)


def bench_decisions(
    policy: Annotated[
        list[str] | None, Opt(help="Policies to measure (repeat); default every registered one.")
    ] = None,
    leaves: Annotated[
        list[int] | None, Opt(help="Backlogged leaves (repeat); default 10000 and 1000.")
    ] = None,
    jobs_per_leaf: Annotated[int, Opt(help="Queued requests per leaf.", min=1)] = 10,
    pops: Annotated[int, Opt(help="Decisions timed per policy and size.", min=1)] = 5000,
    out: Annotated[Path | None, Opt(help="Write results JSON here.")] = Path(
        "out/bench-decisions.json"
    ),
) -> None:
    """Time push, pop and charge of every policy with a deep backlog (no I/O, one process)."""
    from rich.table import Table

    from control_plane.bench.decisions import Size, run, write
    from control_plane.policies.registry import UnknownPolicyError, policy_class

    for name in policy or []:
        try:
            policy_class(name)
        except UnknownPolicyError as exc:
            raise typer.BadParameter(str(exc), param_hint="--policy") from None
    flags.refuse([flags.each_at_least("--leaves", leaves, 1), flags.output_file(out)])
    sizes = [Size(n, jobs_per_leaf) for n in (leaves or [10_000, 1_000])]
    table = Table(title="Scheduling decision cost (µs)")
    for col in ("policy", "leaves", "queued", "push p50", "pop p50", "pop p99", "charge p50"):
        table.add_column(col, justify="right")
    rows = []
    for row in run(policy, sizes, pops):
        rows.append(row)
        table.add_row(
            row["policy"],
            " × ".join(str(n) for n in row["shape"]),
            f"{row['queued']:,}",
            f"{row['push']['p50_us']:.1f}",
            f"{row['pop']['p50_us']:.1f}",
            f"{row['pop']['p99_us']:.1f}",
            f"{row['charge']['p50_us']:.1f}",
        )
    Console().print(table)
    write(rows, out)


def bench_recorder(
    batch: Annotated[
        list[int] | None, Opt(help="Events per read (repeat); default 48 (c=1) and 256.")
    ] = None,
    events: Annotated[int, Opt(help="Events recorded per round.", min=1)] = 20_000,
    rounds: Annotated[int, Opt(help="Interleaved rounds.", min=1)] = 3,
    out: Annotated[Path | None, Opt(help="Write results JSON here.")] = Path(
        "out/bench-recorder.json"
    ),
) -> None:
    """Time the recorder (real Redis, SQLite): CPU µs per recorded request, by batch size."""
    import json

    from rich.table import Table

    from control_plane.bench.recorder_bench import measure, summary

    flags.refuse([flags.each_at_least("--batch", batch, 1), flags.output_file(out)])
    rows = summary(measure(batch or [48, 256], events, rounds))
    table = Table(title=f"Recorder CPU per request ({events:,} events, SQLite)")
    for col in ("batch", "CPU µs / event (median)", "rounds"):
        table.add_column(col, justify="right")
    for row in rows:
        each = " ".join(f"{r['cpu_us_per_event']:.1f}" for r in row["rounds"])
        table.add_row(str(row["batch"]), f"{row['cpu_us_per_event_median']:.1f}", each)
    Console().print(table)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"events": events, "rows": rows}, indent=2))


def bench_perception(
    rounds: Annotated[int, Opt(help="Timed tags per prompt.", min=100)] = 20_000,
    out: Annotated[Path | None, Opt(help="Write results JSON here.")] = Path(
        "out/bench-perception.json"
    ),
    scenario: Annotated[
        list[str] | None,
        Opt(help="Scenario for the length predictor and conformal coverage (repeat)."),
    ] = None,
) -> None:
    """Time the rule tagger (short and 2,048-token prompts), measure its accuracy on the
    labelled sample (dev and held-out halves), and the length predictor's MAE and the
    conformal bound's coverage on simulated scenarios."""
    from rich.table import Table

    from control_plane.bench.perception import LENGTH_SCENARIOS, run, write

    flags.refuse([*(flags.scenario(s) for s in scenario or ()), flags.output_file(out)])
    result = run(rounds, scenarios=scenario or LENGTH_SCENARIOS)
    timing = Table(title="Rule tagger cost (µs)")
    for col in ("prompt", "chars", "p50", "p99"):
        timing.add_column(col, justify="right")
    for name, t in result["timing"].items():
        timing.add_row(name, f"{t['chars']:.0f}", f"{t['p50_us']:.1f}", f"{t['p99_us']:.1f}")
    acc = Table(title="Rule tagger accuracy")
    for col in ("task type", "dev", "held-out"):
        acc.add_column(col, justify="right")
    for task, value in result["held_out"]["per_type"].items():
        dev = result["dev"]["per_type"].get(task)
        acc.add_row(task, _pct(dev), _pct(value))
    acc.add_row("all", _pct(result["dev"]["accuracy"]), _pct(result["held_out"]["accuracy"]))
    lengths = Table(title="Output-length prediction (fcfs + Statera, simulated)")
    for col in ("scenario", "answers", "MAE (tokens)", "under", "coverage", "target"):
        lengths.add_column(col, justify="right")
    for name, m in result["lengths"].items():
        lengths.add_row(
            name, str(m["answers"]), _num(m["mae"]), _pct(m["under_rate"]),
            _num(m["coverage"], 3), _num(m["target"], 2),
        )  # fmt: skip
    Console().print(timing)
    Console().print(acc)
    Console().print(lengths)
    write(result, out)


def bench_hmfs_multimodal(
    speed: Annotated[float, Opt(min=0.01, help="Speed of the simulated workers.")] = 0.25,
    duration: Annotated[float, Opt(min=10, help="Scenario seconds of arrivals.")] = 60.0,
    policy: Annotated[str, Opt(help="Policy of the live scheduler and the simulation.")] = "hmfs",
    tolerance: Annotated[float, Opt(help="Largest relative share difference that agrees.")] = 0.1,
    seed: Annotated[int | None, Opt(help="Override the scenario seed.")] = None,
    state_dir: Annotated[Path | None, Opt(help="The deployment's logs and SQLite.")] = None,
    out: Annotated[Path, Opt(help="Results JSON.")] = Path("out/bench-hmfs-multimodal.json"),
) -> None:
    """Replay `hmfs-multimodal` live (LLM, VLM with real images, image generations, against
    simulated workers of the three kinds) and simulate it: per-tenant shares of unified
    service side by side, the HMFS claims, and the recorder's service per model kind. Exit 1
    when a tenant's shares differ by more than the tolerance."""
    import json

    from rich.progress import Progress
    from rich.table import Table

    from control_plane.bench.multimodal import MultimodalConfig, run

    flags.refuse(
        [
            flags.number("--speed", speed, 0, above=True),
            flags.number("--duration", duration, 10),
            flags.policy(policy),
            flags.number("--tolerance", tolerance, 0),
            flags.directory(state_dir, "--state-dir"),
            flags.output_file(out),
        ]
    )
    cfg = MultimodalConfig(speed, duration, policy, tolerance, seed)
    state = state_dir or Path(tempfile.mkdtemp(prefix="arb-multimodal-"))
    with Progress() as bar:
        task = bar.add_task("hmfs-multimodal live", total=None)
        doc = run(cfg, state, lambda _r: bar.advance(task))
    table = Table(title=f"share of unified service, {policy} (sim vs live at speed {speed})")
    for col in ("tenant", "sim", "live", "difference", "agrees", "live raw-token share"):
        table.add_column(col, justify="right")
    for row in doc["shares"]:
        raw = doc["raw_token_shares_live"].get(row["tenant"])
        table.add_row(
            row["tenant"], _pct1(row["sim"]), _pct1(row["live"]),
            "—" if row["relative"] is None else f"{100 * row['relative']:.1f} %",
            "yes" if row["agrees"] else "NO", _pct1(raw),
        )  # fmt: skip
    claims = Table(title="HMFS claims (contended window)")
    for col in ("", "helper served / demand", "swarm served / demand", "helper / acme"):
        claims.add_column(col, justify="right")
    for side, c in doc["claims"].items():
        claims.add_row(
            side, _num(c["helper_served_over_demand"], 3), _num(c["swarm_served_over_demand"], 3),
            _pct1(c["helper_share_of_acme"]),
        )  # fmt: skip
    kinds = Table(title="recorded service per model kind (SQL)")
    for col in ("tenant", "kind", "requests", "images", "unified service", "share of kind"):
        kinds.add_column(col, justify="right")
    for k in doc["service_by_kind"]:
        kinds.add_row(
            k["tenant"], k["kind"], str(k["requests"]), str(k.get("images") or 0),
            f"{k['unified_service']:,.0f}", _pct1(k["share"]),
        )  # fmt: skip
    console = Console()
    for t in (table, claims, _by_model_table(doc["by_model"]), kinds):
        console.print(t)
    console.print(f"statuses: {doc['statuses']}; failures: {doc['failures'] or 'none'}")
    console.print(f"admission (both sides): {doc['admission']}; deployment under {state}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    console.print(f"wrote {out}")
    raise typer.Exit(0 if doc["agree"] else 1)


def _by_model_table(by_model: dict[str, list[dict[str, Any]]]) -> Any:
    """Per tenant and model, simulated → live, inside the window."""
    from rich.table import Table

    table = Table(title="per tenant and model in the window (sim → live)")
    cols = ("tenant", "model", "arrived", "dispatched", "finished", "share", "queue mean s")
    for col in cols:
        table.add_column(col, justify="right")
    live = {(r["tenant"], r["model"]): r for r in by_model["live"]}
    for s in by_model["sim"]:
        row = live.get((s["tenant"], s["model"]), {})
        cell = [f"{s[k]} → {row.get(k, '—')}" for k in ("arrived", "dispatched", "finished")]
        share = f"{_pct1(s['share'])} → {_pct1(row.get('share'))}"
        wait = f"{_num(s['queue_mean_s'])} → {_num(row.get('queue_mean_s'))}"
        table.add_row(s["tenant"], s["model"], *cell, share, wait)
    return table


def _pct1(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f} %"


def _num(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.0f} %"


def register(group: typer.Typer, aliases: typer.Typer | None = None) -> None:
    """Add `overhead`, `faults`, `soak`, `decisions` and `perception` to `group`; old flat
    names to `aliases`."""
    for name, command in (
        ("overhead", bench_overhead),
        ("faults", bench_faults),
        ("soak", bench_soak),
        ("decisions", bench_decisions),
        ("perception", bench_perception),
        ("recorder", bench_recorder),
        ("hmfs-multimodal", bench_hmfs_multimodal),
        ("workflows", bench_workflows),
    ):
        group.command(name)(command)
        if aliases is not None and name in ("overhead", "faults", "soak"):
            aliases.command(f"bench-{name}", hidden=True)(command)
