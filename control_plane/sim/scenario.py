"""The scenario file: who sends what, when, to which cluster (docs/scenarios.md documents it).

A scenario is YAML validated by these pydantic models (unknown keys are refused, so a typo is
an error rather than a silently ignored knob). The same file drives the simulator (`arbiter
simulate`) and the live replay (`arbiter sim replay`). `load_scenario` also checks cross references
(streams name existing tenants, apps, agents and classes; every class's model is served by some
worker group) and loads the worker profiles.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    model_validator,
)

from control_plane.core.job import Slo
from control_plane.sim.arrivals import Gamma, OnOff, Piecewise, Poisson
from control_plane.sim.distributions import LengthDist
from control_plane.sim.traces import Trace
from control_plane.sim.workflow_spec import WorkflowTemplate
from control_plane.sim.yaml_file import ScenarioError, describe, read_yaml
from storage.repos.fields import MAX_WEIGHT, MIN_WEIGHT, NAME_PATTERN
from workers.engine.profile import LatencyProfile, load_profile

SCENARIOS_DIR = Path(__file__).resolve().parents[2] / "scenarios"
"""Shipped scenarios (`<repo>/scenarios/*.yaml`); `ARBITER_SCENARIOS_DIR` adds another."""


Arrival = Annotated[Poisson | Gamma | OnOff | Piecewise | Trace, Field(discriminator="process")]


class _Strict(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=True, populate_by_name=True, allow_inf_nan=False
    )


class SloSpec(_Strict):
    """Latency targets in seconds; unset fields inherit from the next level down."""

    ttft_s: float | None = Field(None, gt=0)
    tpot_s: float | None = Field(None, gt=0)
    e2e_s: float | None = Field(None, gt=0)


def merge_slo(*levels: SloSpec | None) -> Slo:
    """Most specific first: each target comes from the first level that sets it."""
    out: dict[str, float | None] = {"ttft_s": None, "tpot_s": None, "e2e_s": None}
    for level in levels:
        if level is None:
            continue
        for key in out:
            if out[key] is None:
                out[key] = getattr(level, key)
    return Slo(**out)


class AgentSpec(_Strict):
    name: str = Field(min_length=1)
    weight: float = Field(1.0, ge=MIN_WEIGHT, le=MAX_WEIGHT)
    slo: SloSpec | None = None
    count: int = Field(1, ge=1)
    """`count > 1` expands into agents `name-0` … `name-(count-1)` with the same settings."""

    def names(self) -> list[str]:
        return [self.name] if self.count == 1 else [f"{self.name}-{i}" for i in range(self.count)]


class AppSpec(_Strict):
    name: str = Field(min_length=1)
    weight: float = Field(1.0, ge=MIN_WEIGHT, le=MAX_WEIGHT)
    slo: SloSpec | None = None
    agents: list[AgentSpec] = Field(default_factory=lambda: [AgentSpec(name="default")])

    def agent(self, name: str) -> AgentSpec | None:
        return next((a for a in self.agents if name in a.names()), None)

    def agent_names(self) -> list[str]:
        return [n for a in self.agents for n in a.names()]


class TenantSpec(_Strict):
    name: str = Field(pattern=NAME_PATTERN)
    """A name the live API accepts too (a replay creates the tenant by it)."""
    weight: float = Field(1.0, ge=MIN_WEIGHT, le=MAX_WEIGHT)
    tier: int = Field(0, ge=0)
    slo: SloSpec | None = None
    queue_cap: int | None = Field(None, gt=0)
    """This tenant's queue cap (the tenant record's `queue_cap`); default: the scheduler's."""
    apps: list[AppSpec] = Field(default_factory=lambda: [AppSpec(name="default")])

    def app(self, name: str) -> AppSpec | None:
        return next((a for a in self.apps if a.name == name), None)


class RequestClass(_Strict):
    """Prompt and output length distributions, the model, an optional task type and SLO.

    `output` is what the model generates (it stops there); `max_tokens` is the cap clients of
    the class send, the only output bound the scheduler sees (default 2048, lowered to the
    context room; a draw below the output truncates it).
    """

    prompt: LengthDist
    output: LengthDist
    max_tokens: LengthDist | None = None
    model: str | None = None
    """A model served by the cluster (a profile's `model.name`); default: the first group's."""
    task: str | None = None
    slo: SloSpec | None = None
    """The task-type SLO: the lowest level of the precedence (docs/algorithms.md §0.5)."""


class WorkerGroup(_Strict):
    """`count` workers of one latency profile, with optional engine overrides."""

    profile: str
    count: int = Field(1, ge=1)
    name: str | None = None
    speed: float = Field(1.0, gt=0)
    max_num_seqs: int | None = Field(None, ge=1)
    max_num_batched_tokens: int | None = Field(None, ge=1)
    kv_tokens: int | None = Field(None, ge=16)


class ModelOverride(_Strict):
    unified_cost_factor: float = Field(gt=0)
    """The operator's measured Unified Token factor (as in the live model registry)."""


class Stream(_Strict):
    """Requests of one tenant/app/agent following one arrival process.

    `agent: "*"` gives every agent of the app its own independent copy of the process. A
    stream has a `class`, or a `mix` of classes with relative weights (a "mixed" client); a
    trace stream takes lengths (and possibly the sender) from its CSV.
    """

    tenant: str
    app: str | None = None
    agent: str | None = None
    cls: str | None = Field(None, alias="class")
    mix: dict[str, float] | None = None
    arrival: Arrival
    slo: SloSpec | None = None
    """Per-request targets (the request header level of the precedence)."""

    @model_validator(mode="after")
    def _class_or_mix(self) -> Stream:
        if self.cls is not None and self.mix is not None:
            raise ValueError("a stream has `class` or `mix`, not both")
        if self.cls is None and self.mix is None and not isinstance(self.arrival, Trace):
            raise ValueError("a stream needs `class` or `mix` (only trace streams may omit it)")
        if self.mix is not None and (not self.mix or min(self.mix.values()) <= 0):
            raise ValueError("mix weights must be > 0")
        return self


class PhaseSpec(_Strict):
    """A named arrival-time window that metrics are also broken down by."""

    name: str
    start_s: float = Field(ge=0)
    end_s: float = Field(gt=0)


class SchedulerSpec(_Strict):
    """Scheduler plug-ins and loop knobs (defaults are the live scheduler's settings:
    `tick_interval_s`, `progress_interval_s`, `queue_timeout_s` and the ledger's window)."""

    admission: str = "capacity"
    admission_params: dict[str, Any] = Field(default_factory=dict)
    placement: str = "least_loaded"
    placement_params: dict[str, Any] = Field(default_factory=dict)
    tick_s: float = Field(0.5, gt=0)
    progress_s: float = Field(0.1, ge=0)
    """Output tokens are reported at most this often per request (the gateway's batching);
    0 reports every engine step."""
    ledger_window_s: float = Field(60.0, gt=0)
    queue_timeout_s: float | None = Field(300.0, gt=0)
    """A request still queued this long after arrival is withdrawn (the gateway's timeout)."""
    queue_cap: int | None = Field(None, gt=0)
    """Most requests a tenant may have queued; one more is turned away (`rejected`, the
    gateway's 429). None = unbounded, as in the papers' experiments; a live gateway's default
    is 256 (`ARBITER_DEFAULT_QUEUE_CAP`), so scenarios replayed live should set it."""


class Scenario(_Strict):
    name: str = Field(pattern=NAME_PATTERN)
    """Also the results' directory under `--out`."""
    description: str = ""
    seed: int = 0
    duration_s: float = Field(gt=0)
    """Arrivals happen in `[0, duration_s)`."""
    drain_s: float = Field(300.0, ge=0)
    """After the last arrival, time to finish; what is left is then withdrawn or aborted."""
    load_scale: float = Field(1.0, gt=0)
    cluster: list[WorkerGroup] = Field(min_length=1)
    models: dict[str, ModelOverride] = Field(default_factory=dict)
    tenants: list[TenantSpec] = Field(min_length=1)
    classes: dict[str, RequestClass] = Field(default_factory=dict)
    workload: list[Stream] = Field(default_factory=list)
    workflows: list[WorkflowTemplate] = Field(default_factory=list)
    """Multi-agent applications as closed loops (`sim/workflow_spec.py`)."""
    phases: list[PhaseSpec] = Field(default_factory=list)
    scheduler: SchedulerSpec = Field(default_factory=SchedulerSpec)

    _base_dir: Path = PrivateAttr(default_factory=Path.cwd)
    _profiles: dict[str, LatencyProfile] = PrivateAttr(default_factory=dict)

    @property
    def base_dir(self) -> Path:
        return self._base_dir

    def profile(self, group: WorkerGroup) -> LatencyProfile:
        if group.profile not in self._profiles:
            self._profiles[group.profile] = load_profile(group.profile)
        return self._profiles[group.profile]

    def served_models(self) -> list[str]:
        return list(dict.fromkeys(self.profile(g).model.name for g in self.cluster))

    def image_models(self) -> set[str]:
        """Served models of kind `image`: a request's output there (`n · steps` units) is what
        its client asks for, and the gateway queues it as exactly that (its cap)."""
        return {
            self.profile(g).model.name
            for g in self.cluster
            if self.profile(g).model.kind == "image"
        }

    def tenant(self, name: str) -> TenantSpec:
        found = next((t for t in self.tenants if t.name == name), None)
        if found is None:
            raise ValueError(f"unknown tenant {name!r}")
        return found

    def with_overrides(
        self,
        seed: int | None = None,
        duration_s: float | None = None,
        load_scale: float | None = None,
    ) -> Scenario:
        """A copy with the CLI's `--seed` / `--duration` (or a load sweep's `load_scale`)
        applied; profiles and base dir kept."""
        update: dict[str, Any] = {}
        if seed is not None:
            update["seed"] = seed
        if duration_s is not None:
            update["duration_s"] = duration_s
        if load_scale is not None:
            update["load_scale"] = load_scale
        return self._copy(update)

    def as_live(self, speed: float) -> Scenario:
        """A copy whose scheduler time constants are a live stack's when replayed at `speed`.

        `arbiter sim replay --speed S` compresses scenario time S-fold, but the gateway and the
        scheduler keep their wall-clock constants (progress batching, tick, ledger window, queue
        timeout); in scenario seconds those last S times longer, and so they do here.
        """
        sched = self.scheduler
        timeout = sched.queue_timeout_s
        scaled = sched.model_copy(
            update={
                "tick_s": sched.tick_s * speed,
                "progress_s": sched.progress_s * speed,
                "ledger_window_s": sched.ledger_window_s * speed,
                "queue_timeout_s": None if timeout is None else timeout * speed,
            }
        )
        return self._copy({"scheduler": scaled})

    def _copy(self, update: dict[str, Any]) -> Scenario:
        copy = self.model_copy(update=update)
        copy._base_dir, copy._profiles = self._base_dir, self._profiles
        return copy


def _check_references(s: Scenario) -> None:
    _unique("tenants", [t.name for t in s.tenants])
    _unique("phases", [p.name for p in s.phases])
    _unique("workflows", [w.name for w in s.workflows])
    for tenant in s.tenants:
        _unique(f"tenant {tenant.name!r}: apps", [a.name for a in tenant.apps])
        for each in tenant.apps:
            _unique(f"app {tenant.name}/{each.name}: agents", each.agent_names())
    models = s.served_models()
    for cname, cls in s.classes.items():
        if cls.model is not None and cls.model not in models:
            raise ValueError(f"class {cname!r}: model {cls.model!r} is not served ({models})")
    for i, stream in enumerate(s.workload):
        where = f"workload[{i}]"
        tenant = s.tenant(stream.tenant)
        app = tenant.app(stream.app or tenant.apps[0].name)
        if app is None:
            raise ValueError(f"{where}: tenant {tenant.name!r} has no app {stream.app!r}")
        if stream.agent not in (None, "*") and app.agent(stream.agent) is None:
            raise ValueError(f"{where}: app {app.name!r} has no agent {stream.agent!r}")
        for cname in ([stream.cls] if stream.cls else []) + list(stream.mix or {}):
            if cname not in s.classes:
                raise ValueError(f"{where}: unknown class {cname!r}")
    if not s.workload and not s.workflows:
        raise ValueError("workload: a scenario needs streams or workflows")
    for template in s.workflows:
        where = f"workflows[{template.name}]"
        tenant = s.tenant(template.tenant)
        app = tenant.app(template.app or tenant.apps[0].name)
        if app is None:
            raise ValueError(f"{where}: tenant {tenant.name!r} has no app {template.app!r}")
        for name, agent in template.agents.items():
            if app.agent(name) is None:
                raise ValueError(f"{where}: app {app.name!r} has no agent {name!r}")
            if agent.cls not in s.classes:
                raise ValueError(f"{where}: unknown class {agent.cls!r}")
    for phase in s.phases:
        if phase.end_s <= phase.start_s:
            raise ValueError(f"phase {phase.name!r}: end_s must be after start_s")


def parse_scenario(data: dict[str, Any], base_dir: Path | None = None) -> Scenario:
    """Validate a scenario mapping (as loaded from YAML) and its cross references."""
    scenario = Scenario.model_validate(data)
    scenario._base_dir = base_dir or Path.cwd()
    for group in scenario.cluster:
        scenario.profile(group)
    _check_references(scenario)
    return scenario


def _unique(what: str, names: list[str]) -> None:
    doubled = sorted({n for n in names if names.count(n) > 1})
    if doubled:
        raise ValueError(f"{what}: names must be unique, {', '.join(map(repr, doubled))} repeated")


def scenario_dirs() -> list[Path]:
    extra = os.environ.get("ARBITER_SCENARIOS_DIR")
    return ([Path(extra)] if extra else []) + [SCENARIOS_DIR]


def list_scenarios() -> list[str]:
    """Names of the shipped scenarios (and of `ARBITER_SCENARIOS_DIR`'s), sorted."""
    return sorted({p.stem for d in scenario_dirs() if d.is_dir() for p in d.glob("*.yaml")})


def resolve_scenario(name_or_path: str) -> Path:
    """A scenario file by path, or a shipped scenario by name (`exfairs-I`)."""
    path = Path(name_or_path)
    if path.is_file():
        return path
    for directory in scenario_dirs():
        candidate = directory / f"{name_or_path}.yaml"
        if candidate.is_file():
            return candidate
    raise ScenarioError(f"no scenario {name_or_path!r} (shipped: {', '.join(list_scenarios())})")


def load_scenario(name_or_path: str) -> Scenario:
    """Read, validate and cross-check a scenario file (by path or shipped name); raises
    `ScenarioError` with one line naming the file and the field."""
    path = resolve_scenario(name_or_path)
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise ScenarioError(f"{path}: a scenario is a YAML mapping")
    try:
        return parse_scenario(data, path.resolve().parent)
    except ValidationError as exc:
        raise ScenarioError(describe(path, exc)) from None
    except ValueError as exc:
        raise ScenarioError(f"{path}: {exc}") from None
