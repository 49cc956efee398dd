"""What `arbiter sim run` and `arbiter sim replay` check before any run or request: every
problem an operator typed is one line (`OptionError`) before anything is written or sent."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from control_plane.admission.registry import build_admission
from control_plane.core.cli_errors import OptionError, is_file, is_folder, unwritable
from control_plane.core.plugins import PluginParamsError, UnknownPluginError
from control_plane.placement.registry import build_placement
from control_plane.sim.cli_args import parse_keys, parse_pairs
from control_plane.sim.runner import PluginChoice
from control_plane.sim.scenario import Scenario
from control_plane.sim.workload import RequestSpec, build_workload

MIN_LIVE_SPEED = 0.001
"""Below it the scaled scheduler tick is so short that a run never ends in practice."""


def live_scenarios(chosen: list[Scenario], speed: float) -> list[Scenario]:
    """`--live-speed`: the scenarios as a live replay at `speed` sees them, refused unless
    `speed` is a finite number ≥ `MIN_LIVE_SPEED` whose scaled scheduler times stay finite
    (an infinite one ran every policy, then failed writing the results)."""
    if not (math.isfinite(speed) and speed >= MIN_LIVE_SPEED):
        raise OptionError(
            f"--live-speed: must be a finite number >= {MIN_LIVE_SPEED:g}, got {speed}"
        )
    live = [scenario.as_live(speed) for scenario in chosen]
    for scenario in live:
        s = scenario.scheduler
        times = (s.tick_s, s.progress_s, s.ledger_window_s, s.queue_timeout_s or 0.0)
        if not all(math.isfinite(t) for t in times):
            raise OptionError(
                f"--live-speed: {speed} makes the scheduler times of {scenario.name!r} infinite"
            )
    return live


def check_plugins(chosen: list[Scenario], plugins: PluginChoice) -> None:
    """Build each scenario's admission and placement as its runs will (the flags over the
    scenario's), so a bad name or param names `--admission`, `--placement` or `--param`, not
    the policy whose run would have built it."""
    for scenario in chosen:
        sched = scenario.scheduler
        _check_plugin(
            scenario.name,
            "admission",
            build_admission,
            (plugins.admission, plugins.admission_params),
            (sched.admission, sched.admission_params),
        )
        _check_plugin(
            scenario.name,
            "placement",
            build_placement,
            (plugins.placement, plugins.placement_params),
            (sched.placement, sched.placement_params),
        )


def _check_plugin(
    scenario: str,
    kind: str,
    build: Callable[[str, dict[str, Any]], object],
    flags: tuple[str | None, dict[str, Any] | None],
    own: tuple[str, dict[str, Any]],
) -> None:
    name, params = flags
    try:
        build(name or own[0], own[1] if params is None else params)
    except UnknownPluginError as exc:
        field = f"--{kind}" if name else f"{scenario}: scheduler.{kind}"
        raise OptionError(f"{field}: {exc}") from None
    except PluginParamsError as exc:
        if params is not None:
            field = f"--param {kind}.*"
        elif name:  # the scenario's params, given to another plug-in
            field = f"--{kind} {name} with scheduler.{kind}_params of {scenario}"
        else:
            field = f"{scenario}: scheduler.{kind}_params"
        raise OptionError(f"{field}: {exc}") from None


def check_outputs(chosen: list[Scenario], out: Path) -> None:
    """Refuse, before any run, results that could not be written or would overwrite each
    other: `--out` an existing file, or two scenarios of one name (one directory each)."""
    if is_file(out):
        raise OptionError(f"--out {out}: exists and is not a directory")
    if (problem := unwritable(out)) is not None:  # found now, not after the runs
        raise OptionError(f"--out {out}: {problem}")
    names = [scenario.name for scenario in chosen]
    doubled = sorted({n for n in names if names.count(n) > 1})
    if doubled:
        raise OptionError(
            f"several scenarios are named {', '.join(map(repr, doubled))}: their results would "
            "overwrite each other under --out (give each file its own `name:`)"
        )


def check_output_file(out: Path) -> None:
    """Refuse, before any run, a results file that could not be written."""
    if is_folder(out):
        raise OptionError(f"--out {out}: is a directory; give a file name")
    if (problem := unwritable(out.parent)) is not None:
        raise OptionError(f"--out {out}: {problem}")


def replay_inputs(
    scenario: Scenario,
    gateway: str | None,
    api_key: str | None,
    key: list[str] | None,
    keys_file: Path | None,
    model: list[str] | None,
) -> tuple[str, dict[str, str], list[RequestSpec], dict[str, str]]:
    """Gateway, keys, workload and model names of a replay of `scenario`, every tenant's key
    checked before anything is written or sent (`OptionError` otherwise)."""
    from control_plane.sim.live_bench import load_keys, missing_keys

    url, keys = load_keys(keys_file) if keys_file else (None, {})
    keys.update(parse_keys(key or []))
    models = parse_pairs(model or [], "--model")
    if api_key:
        keys.setdefault("*", api_key)
    base = gateway or url
    if not base or not keys:
        raise OptionError("give --gateway and API keys (--api-key, --key or --keys-file)")
    specs = build_workload(scenario)
    missing = missing_keys((s.tenant for s in specs), keys)
    if missing:
        raise OptionError(
            f"no API key for tenant(s) {', '.join(missing)} of scenario {scenario.name!r} "
            "(--key TENANT=KEY, --api-key, or --keys-file)"
        )
    return base, keys, specs, models
