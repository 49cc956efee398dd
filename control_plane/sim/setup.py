"""One simulation's scheduler, built from the registries exactly as the live scheduler's is.

`build_setup` composes `Dispatcher(policy, admission, placement)` with `build_policy`,
`build_admission` and `build_placement` over a fresh `PolicyContext` (ledger window from the
scenario, weights of every tenant, application and agent), plus the scenario's engines.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from control_plane.admission.registry import build_admission
from control_plane.control.meta import AUTO, MetaController, build_controller
from control_plane.core.dispatcher import Dispatcher
from control_plane.core.ledger import Ledger
from control_plane.core.policy import PolicyContext, Weights
from control_plane.placement.registry import build_placement
from control_plane.policies.registry import build_policy
from control_plane.sim.cluster import SimWorker, build_workers, unit_factors
from control_plane.sim.scenario import Scenario


@dataclass(frozen=True)
class PolicySpec:
    """A policy run: a label (the results key), a registry name and validated-later params."""

    label: str
    name: str
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class SimSetup:
    scenario: Scenario
    policy: PolicySpec
    dispatcher: Dispatcher
    workers: list[SimWorker]
    unit_factors: dict[str, float]
    tick_s: float
    progress_s: float
    queue_timeout_s: float | None
    gap_sample_s: float = 0.1
    queue_caps: dict[str, int] = field(default_factory=dict)
    """Tenant → most requests it may have queued (absent: unbounded)."""
    controller: MetaController | None = None
    """The meta-controller of an `auto` run."""


def queue_caps(scenario: Scenario) -> dict[str, int]:
    """Each tenant's cap: its own `queue_cap`, else the scheduler's (none when both are unset)."""
    caps: dict[str, int] = {}
    for tenant in scenario.tenants:
        cap = tenant.queue_cap or scenario.scheduler.queue_cap
        if cap is not None:
            caps[tenant.name] = cap
    return caps


def scenario_weights(scenario: Scenario) -> Weights:
    """Weights of every node the scenario declares (tenant, app, agent paths)."""
    weights = Weights()
    for tenant in scenario.tenants:
        weights.set((tenant.name,), tenant.weight)
        for app in tenant.apps:
            weights.set((tenant.name, app.name), app.weight)
            for agent in app.agents:
                for name in agent.names():
                    weights.set((tenant.name, app.name, name), agent.weight)
    return weights


def build_setup(
    scenario: Scenario,
    policy: PolicySpec,
    *,
    admission: str | None = None,
    admission_params: dict[str, Any] | None = None,
    placement: str | None = None,
    placement_params: dict[str, Any] | None = None,
    speed: float = 1.0,
    gap_sample_s: float = 0.1,
) -> SimSetup:
    """A fresh scheduler and cluster for one run; plug-in names/params override the scenario's."""
    sched = scenario.scheduler
    ctx = PolicyContext(
        weights=scenario_weights(scenario), ledger=Ledger(window_s=sched.ledger_window_s)
    )
    controller = None
    if policy.name == AUTO:
        controller = build_controller(policy.params, lambda name: build_policy(name, ctx))
        first = build_policy(controller.current, ctx)
    else:
        first = build_policy(policy.name, ctx, policy.params)
    dispatcher = Dispatcher(
        first,
        build_admission(
            admission or sched.admission,
            admission_params if admission_params is not None else sched.admission_params,
        ),
        build_placement(
            placement or sched.placement,
            placement_params if placement_params is not None else sched.placement_params,
        ),
    )
    return SimSetup(
        scenario=scenario,
        policy=policy,
        dispatcher=dispatcher,
        workers=build_workers(scenario, speed),
        unit_factors=unit_factors(scenario),
        tick_s=sched.tick_s,
        progress_s=sched.progress_s,
        queue_timeout_s=sched.queue_timeout_s,
        gap_sample_s=gap_sample_s,
        queue_caps=queue_caps(scenario),
        controller=controller,
    )
