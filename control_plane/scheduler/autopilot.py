"""The `auto` policy knob on the leader: handing the choice to the meta-controller, and
publishing its switches as `policy_switched` events (the recorder writes them as audit rows).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from control_plane.contracts.events import PolicySwitched
from control_plane.contracts.knobs import Fairness
from control_plane.control.llm_selector import LlmSelector
from control_plane.control.meta import MetaController, Switch, build_controller
from control_plane.core.policy import Policy
from control_plane.core.scheduler_core import SchedulerCore
from control_plane.policies.registry import build_policy, policy_class
from control_plane.scheduler.advisor import Advisor
from control_plane.scheduler.metrics import SchedulerMetrics
from control_plane.state import EventStream, StateUnavailable

log = logging.getLogger(__name__)
RECENT = 20
"""Switches the live view carries (the audit log has them all)."""


def hand_over(core: SchedulerCore, params: dict[str, Any]) -> str | None:
    """Attach a controller built from `params` to `core`, starting from its `initial` policy
    (nothing when a controller of the same params already runs, e.g. the one a new leader
    restored); → why it could not be built (logged; the core keeps its own), else None."""
    if isinstance(core.controller, MetaController) and core.controller.params == params:
        return None
    try:
        build = auto_builder(core)
        controller = build_controller(params, build)
        if core.dispatcher.policy.name != controller.current:
            core.switch_policy(build(controller.current), time.time())
    except Exception as exc:  # invalid here, or a policy's own code raised
        log.exception("ignoring auto policy knob %r: it cannot be built", params)
        return f"'auto' cannot be built on the leader: {type(exc).__name__}: {exc}"[:500]
    controller.attach(core)
    core.controller = controller
    log.info("policy handed to the meta-controller (%s)", params.get("selector", "rules"))
    return None


def auto_builder(core: SchedulerCore) -> Callable[[str], Policy]:
    """How the meta-controller builds a policy: over the core's context, with the `fairness`
    knob's α and β where the policy takes them (`core.fairness`, read at each build)."""

    def build(name: str) -> Policy:
        return build_policy(name, core.ctx, carried(name, core.fairness))

    return build


def fairness_of(knob: Fairness | None) -> dict[str, float]:
    """The α and β a `fairness` knob sets (none when unset)."""
    pairs = (
        ("alpha", None if knob is None else knob.alpha),
        ("beta", None if knob is None else knob.beta),
    )
    return {k: float(v) for k, v in pairs if v is not None}


def carried(name: str, fairness: Mapping[str, float]) -> dict[str, float]:
    """The part of `fairness` policy `name` takes as params."""
    if not fairness:
        return {}
    fields = policy_class(name).Params.model_fields
    return {k: v for k, v in fairness.items() if k in fields}


def follow_fairness(core: SchedulerCore, fairness: Mapping[str, float], now: float) -> None:
    """A new `fairness` knob under `auto`: the policy the controller runs is built again with
    it when it takes α or β (a zero-downtime switch: queue and counters kept)."""
    core.fairness = dict(fairness)
    controller = core.controller
    if not isinstance(controller, MetaController):
        return
    params = core.dispatcher.policy.params.model_dump()
    wanted = carried(controller.current, core.fairness)
    if any(params.get(k) != v for k, v in wanted.items()):
        core.switch_policy(controller.build(controller.current), now)


def export(core: SchedulerCore, metrics: SchedulerMetrics) -> None:
    """The controller's state as gauges: whether it runs, and its last `V_long`."""
    controller = core.controller
    active = isinstance(controller, MetaController)
    metrics.controller_active.set(1.0 if active else 0.0)
    metrics.controller_limit.clear()
    for name, value in core.dispatcher.limits.to_json().items():
        if value is not None:
            metrics.controller_limit.labels(name).set(float(value))
    view = controller.last_view if isinstance(controller, MetaController) else None
    if view is None:
        if not active:
            metrics.controller_view.clear()  # no stale view once a policy is pinned
        return
    for name, value in view.to_json().items():
        if isinstance(value, int | float) and not isinstance(value, bool) and name != "t":
            metrics.controller_view.labels(name).set(float(value))


def state(core: SchedulerCore) -> dict[str, Any] | None:
    """The controller for the live view: selector, pool, current policy, its last `V_long`
    and its latest switches; None when a policy is pinned."""
    controller = core.controller
    if not isinstance(controller, MetaController):
        return None
    view, execution = controller.last_view, controller.execution
    return {
        "selector": controller.selector.name,
        "pool": list(controller.pool),
        "period_s": controller.period_s,
        "current": controller.current,
        "view": view.to_json() if view is not None else None,
        "switches": [s.to_json() for s in controller.switches[-RECENT:]],
        "limits": core.dispatcher.limits.to_json(),
        "llm": _llm_state(controller),
        "limit_changes": [c.to_json() for c in execution.changes[-RECENT:]] if execution else [],
    }


def _llm_state(controller: MetaController) -> dict[str, Any] | None:
    selector = controller.selector
    if not isinstance(selector, LlmSelector):
        return None
    return {
        "model": selector.params.model,
        "stats": selector.stats,
        "last_error": selector.last_error,
    }


async def after_tick(
    core: SchedulerCore, advisor: Advisor, events: EventStream, metrics: SchedulerMetrics
) -> None:
    """The controller's I/O after each cycle: the `llm` selector's question, a detachment to
    report, the gauges, and its new switches as events."""
    advisor.poll(core)
    if core.controller_error is not None:
        log.error("meta-controller detached: %s", core.controller_error)
        core.controller_error = None
    export(core, metrics)
    await publish_switches(core, events, metrics)


async def publish_switches(
    core: SchedulerCore, events: EventStream, metrics: SchedulerMetrics | None = None
) -> None:
    """The controller's new switches as events; kept for the next call when Redis is down."""
    controller = core.controller
    if not isinstance(controller, MetaController):
        return
    switches = controller.take_unsent()
    if not switches:
        return
    try:
        await events.publish([switch_event(s) for s in switches])
    except StateUnavailable:
        controller.put_back(switches)
        raise
    if metrics is not None:
        for s in switches:
            metrics.controller_switches.labels(s.new, s.reason.split(":")[0]).inc()
    for s in switches:
        log.info("controller switched %s -> %s (%s)", s.old, s.new, s.reason)


def switch_event(s: Switch) -> PolicySwitched:
    view = json.dumps(s.view, sort_keys=True, separators=(",", ":"))
    return PolicySwitched(
        f"switch-{s.t:.6f}-{s.new}", s.t, s.old, s.new, s.reason, s.selector, view
    )


def controller_snapshot(core: SchedulerCore) -> dict[str, Any] | None:
    """What a new leader restores of the controller (None when a policy is pinned)."""
    controller = core.controller
    if not isinstance(controller, MetaController):
        return None
    return {"params": controller.params, "state": controller.snapshot()}
