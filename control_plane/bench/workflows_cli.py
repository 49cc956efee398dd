"""`arbiter bench workflows`: the command line of `control_plane.bench.workflows_live`."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

Opt = typer.Option


def bench_workflows(
    scenario: Annotated[str, Opt(help="Workflow scenario (one worker group).")] = (
        "kairos-colocated"
    ),
    policy: Annotated[str, Opt(help="Policy of the live scheduler and the simulation.")] = (
        "kairos"
    ),
    placement: Annotated[str, Opt(help="Placement, live and simulated.")] = "kairos_slots",
    speed: Annotated[float, Opt(min=0.01, help="Replay speed (workers run group speed × it).")] = (
        0.25
    ),
    duration: Annotated[float, Opt(min=5, help="Scenario seconds of arrivals.")] = 60.0,
    tolerance: Annotated[float, Opt(help="Largest relative mean-latency gap that agrees.")] = 0.2,
    seed: Annotated[int | None, Opt(help="Override the scenario seed.")] = None,
    state_dir: Annotated[Path | None, Opt(help="The deployment's logs and SQLite.")] = None,
    out: Annotated[Path, Opt(help="Results JSON.")] = Path("out/bench-workflows.json"),
) -> None:
    """Run a workflow scenario live as closed-loop multi-agent clients (each call sent when its
    upstream call ended, with X-Arbiter-Workflow and X-Arbiter-Upstream) and simulate it: the
    program-level metrics side by side, the learned edge frequencies beside those sent, and
    the recorder's program report. Exit 1 when the mean workflow latencies differ by more than
    the tolerance."""
    from control_plane.bench import flags_cli as flags
    from control_plane.bench.workflows_live import WorkflowsConfig, run

    flags.refuse(
        [
            flags.workflow_scenario(scenario),
            flags.policy(policy),
            flags.placement(placement),
            flags.number("--speed", speed, 0, above=True),
            flags.number("--duration", duration, 5),
            flags.number("--tolerance", tolerance, 0),
            flags.directory(state_dir, "--state-dir"),
            flags.output_file(out),
        ]
    )
    cfg = WorkflowsConfig(scenario, policy, placement, speed, duration, tolerance, seed)
    state = state_dir or Path(tempfile.mkdtemp(prefix="arb-workflows-"))
    with Progress() as bar:
        task = bar.add_task(f"{scenario} live", total=None)
        doc = run(cfg, state, lambda _r: bar.advance(task))
    console = Console()
    console.print(_programs(doc["programs"], f"{policy} + {placement}, speed {speed}"))
    console.print(_frequencies(doc["frequencies"]))
    m = doc["mean_e2e_s"]
    gap = "—" if m["relative"] is None else f"{100 * m['relative']:.1f} %"
    console.print(
        f"mean workflow latency: sim {_num(m['sim'])} s, live {_num(m['live'])} s ({gap}); "
        f"statuses {doc['statuses']}; deployment under {state}"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    console.print(f"wrote {out}")
    raise typer.Exit(0 if doc["agree"] else 1)


def _programs(programs: Mapping[str, Any], title: str) -> Table:
    table = Table(title=f"program-level metrics, {title}")
    for col in ("application", "side", "done", "e2e mean s", "e2e p90 s", "e2e p99 s", "ms/token"):
        table.add_column(col, justify="right")
    apps = sorted(set(programs["sim"]) | set(programs["live"]))
    for app in apps:
        for side in ("sim", "live"):
            m = programs[side].get(app)
            if m is None:
                continue
            e2e, tok = m["e2e_s"], m["token_latency_s"]
            ms = None if tok["mean"] is None else 1000 * tok["mean"]
            table.add_row(
                app, side, f"{m['completed']}/{m['workflows']}", _num(e2e["mean"]),
                _num(e2e["p90"]), _num(e2e["p99"]), _num(ms),
            )  # fmt: skip
    return table


def _frequencies(freq: Mapping[str, Any]) -> Table:
    table = Table(title="edge frequencies: sent vs learned by the leader")
    for col in ("application", "edge", "sent", "learned"):
        table.add_column(col, justify="right")
    for app, edges in sorted(freq["sent"].items()):
        learned = freq["learned"].get(app) or {}
        for edge, value in sorted(edges.items()):
            table.add_row(app, edge, _pct(value), _pct(learned.get(edge)))
    return table


def _num(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f} %"
