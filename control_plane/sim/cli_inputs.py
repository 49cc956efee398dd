"""What `arbiter sim run` and `arbiter sim replay` check before any run or request: every
problem an operator typed is one line (`OptionError`) before anything is written or sent."""

from __future__ import annotations

from pathlib import Path

from control_plane.core.cli_errors import OptionError
from control_plane.sim.cli_args import parse_keys, parse_pairs
from control_plane.sim.scenario import Scenario
from control_plane.sim.workload import RequestSpec, build_workload


def check_outputs(chosen: list[Scenario], out: Path) -> None:
    """Refuse, before any run, results that could not be written or would overwrite each
    other: `--out` an existing file, or two scenarios of one name (one directory each)."""
    if out.exists() and not out.is_dir():
        raise OptionError(f"--out {out}: exists and is not a directory")
    names = [scenario.name for scenario in chosen]
    doubled = sorted({n for n in names if names.count(n) > 1})
    if doubled:
        raise OptionError(
            f"several scenarios are named {', '.join(map(repr, doubled))}: their results would "
            "overwrite each other under --out (give each file its own `name:`)"
        )


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
