"""The `arbiter bench …` flags that typer's types and ranges cannot check, checked before a
command starts anything (a deployment, a timed loop, a file).

Rule: every check returns one line naming the flag, what is wrong and what is allowed (None
when the value is fine); `refuse` prints each as `error: <line>` on stderr and exits with
status 2, like `arbiter up`. Guarantee: a command that calls `refuse` first starts nothing on a
bad value. A value typer already refuses (below `min=`) never gets here; an infinite number
does (typer's ranges let it through), and so do plug-in and scenario names, paths, and
combinations of flags that could never give a verdict.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import typer
from typer._click.exceptions import ClickException
from typer._click.globals import get_current_context
from typer.core import TyperGroup

from control_plane.core.cli_errors import is_file, is_folder, unwritable
from control_plane.core.plugins import UnknownPluginError
from control_plane.sim.yaml_file import ScenarioError

Problem = str | None


def refuse(problems: Iterable[Problem]) -> None:
    """Print every problem as one `error:` line and exit 2; return when there is none."""
    lines = [" ".join(p.split()) for p in problems if p]
    for line in lines:
        typer.echo(f"error: {line}", err=True)
    if lines:
        raise typer.Exit(2)


def number(flag: str, value: float | None, low: float, *, above: bool = False) -> Problem:
    """A finite number ≥ `low` (> `low` when `above`), or unset."""
    if value is None:
        return None
    ok = math.isfinite(value) and (value > low if above else value >= low)
    if ok:
        return None
    bound = f"> {low:g}" if above else f"≥ {low:g}"
    return f"{flag}: must be a finite number {bound}, got {value:g}"


def each_at_least(flag: str, values: Sequence[int] | None, low: int) -> Problem:
    """Every value of a repeated integer flag ≥ `low`."""
    bad = [v for v in values or () if v < low]
    return f"{flag}: every value must be at least {low}, got {bad[0]}" if bad else None


def soak_samples(minutes: float, sample_s: float, warmup_s: float) -> Problem:
    """A soak long enough for its verdict: `2 × WINDOW` samples after the warm-up (the first
    and the last `WINDOW` are compared; fewer never pass)."""
    from control_plane.bench.soak_report import WINDOW

    if not all(math.isfinite(v) and v >= 0 for v in (minutes, sample_s, warmup_s)):
        return None  # `number` names the flag
    needed = 2 * WINDOW
    first = math.ceil(warmup_s / sample_s - 1e-9)
    after = math.floor(minutes * 60.0 / sample_s + 1e-9) - first + 1
    if after >= needed:
        return None
    least = (first + needed - 1) * sample_s / 60.0
    return (
        f"--minutes: {minutes:g} leaves {max(after, 0)} samples after the {warmup_s:g} s "
        f"warm-up (--warmup-s), one every {sample_s:g} s (--sample-s); the verdict needs "
        f"{needed}: run at least {least:g} minutes"
    )


def policy(name: str, flag: str = "--policy") -> Problem:
    from control_plane.policies.registry import policy_class

    return _plugin(flag, lambda: policy_class(name))


def placement(name: str, flag: str = "--placement") -> Problem:
    from control_plane.placement.registry import build_placement

    return _plugin(flag, lambda: build_placement(name))


def _plugin(flag: str, build: Callable[[], object]) -> Problem:
    try:
        build()
    except UnknownPluginError as exc:
        return f"{flag}: {exc}"
    return None


def scenario(name: str, flag: str = "--scenario") -> Problem:
    """A shipped scenario's name or a scenario file that parses."""
    from control_plane.sim.scenario import load_scenario

    try:
        load_scenario(name)
    except ScenarioError as exc:
        return f"{flag}: {exc}"
    return None


def workflow_scenario(name: str, flag: str = "--scenario") -> Problem:
    """A scenario of workflows (closed-loop multi-agent applications) on one worker group."""
    from control_plane.sim.scenario import list_scenarios

    try:
        gap = _workflow_gap(name)
    except ScenarioError as exc:
        return f"{flag}: {exc}"
    if gap is None:
        return None
    fit = [n for n in list_scenarios() if _fits(n)]
    return f"{flag}: {name} {gap}; workflow scenarios: {', '.join(fit)}"


def _fits(name: str) -> bool:
    try:
        return _workflow_gap(name) is None
    except ScenarioError:  # a broken file beside the shipped ones is not offered
        return False


def _workflow_gap(name: str) -> str | None:
    """Why `name` is no workflow scenario on one worker group; None when it is one."""
    from control_plane.sim.scenario import load_scenario

    loaded = load_scenario(name)
    if not loaded.workflows:
        return "has no workflows"
    if len(loaded.cluster) != 1:
        return f"runs on {len(loaded.cluster)} worker groups; the live bench deploys one"
    return None


def output_file(path: Path | None, flag: str = "--out") -> Problem:
    """A file that can be written: not a directory, under a directory that exists or can be
    made (no file on the way), writable."""
    if path is None:
        return None
    if is_folder(path):
        return f"{flag}: {path} is a directory; give a file name"
    return _creatable(path.parent, flag, path)


def directory(path: Path | None, flag: str) -> Problem:
    """A directory that exists or can be made (no file on the way), writable."""
    if path is None:
        return None
    if is_file(path):
        return f"{flag}: {path} is a file, not a directory"
    return _creatable(path, flag, path)


def _creatable(folder: Path, flag: str, path: Path) -> Problem:
    problem = unwritable(folder)
    return None if problem is None else f"{flag}: {path}: {problem}"


def up_json(path: Path | None, tenants: Sequence[str], flag: str = "--attach") -> Problem:
    """The `up.json` of a running `arbiter up`: its gateway and the tenants' keys."""
    if path is None:
        return None
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        return f"{flag}: cannot read {path}: {exc.strerror}"
    except ValueError:
        return f"{flag}: {path} is not JSON; give the up.json that `arbiter up` wrote"
    if not isinstance(data, dict) or not data.get("gateway_url"):
        return f"{flag}: {path} has no gateway_url; give the up.json that `arbiter up` wrote"
    missing = [t for t in tenants if t not in (data.get("tenants") or {})]
    if missing:
        return f"{flag}: {path} has no key of tenant {missing[0]} (start it with --tenant)"
    return None


def up_args(args: Sequence[str] | None, flag: str = "--up-arg") -> Problem:
    """Extra `arbiter up` flags, parsed by `arbiter up`'s own parser (nothing runs)."""
    if not args:
        return None
    ctx = get_current_context(silent=True)
    root = ctx.find_root() if ctx is not None else None
    if root is None or not isinstance(root.command, TyperGroup):
        return None
    up = root.command.get_command(root, "up")
    if up is None:  # the bench group alone, not under `arbiter`: `arbiter up` will say
        return None
    if "--help" in args:  # its parser would print the help and exit
        return f"{flag}: --help is not a flag to start `arbiter up` with"
    try:
        up.make_context("up", list(args), parent=root)
    except ClickException as exc:
        return f"{flag}: {' '.join(args)}: {exc.format_message()}"
    return None


def overhead_problems(
    concurrency: Sequence[int] | None,
    requests: int,
    workers: int,
    speed: float,
    policy_name: str,
    profile: Path | None,
    profile_concurrency: int,
    out: Path | None,
) -> list[Problem]:
    """`arbiter bench overhead`'s flags (its own typer options carry no ranges)."""
    levels = list(concurrency or [1, 64, 128])
    problems = [
        each_at_least("--concurrency", levels, 1),
        None if requests >= 1 else f"--requests: must be at least 1, got {requests}",
        None if workers >= 1 else f"--workers: must be at least 1, got {workers}",
        number("--speed", speed, 0, above=True),
        policy(policy_name),
        directory(profile, "--profile"),
        output_file(out),
    ]
    if profile is not None and profile_concurrency not in levels:
        problems.append(
            f"--profile-concurrency: {profile_concurrency} is not one of the measured levels "
            f"({', '.join(map(str, levels))}): nothing would be profiled"
        )
    return problems
