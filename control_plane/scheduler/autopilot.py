"""The `auto` policy knob on the leader: handing the choice to the meta-controller, and
publishing its switches as `policy_switched` events (the recorder writes them as audit rows).
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from control_plane.contracts.events import PolicySwitched
from control_plane.control.meta import MetaController, Switch, build_controller
from control_plane.core.scheduler_core import SchedulerCore
from control_plane.policies.registry import build_policy
from control_plane.state import EventStream, StateUnavailable

log = logging.getLogger(__name__)


def hand_over(core: SchedulerCore, params: dict[str, Any], current: dict[str, Any] | None) -> bool:
    """Attach a controller built from `params` to `core`, starting from its `initial` policy;
    False when the same controller already runs or the params are invalid (logged)."""
    if isinstance(core.controller, MetaController) and current == params:
        return False
    try:
        controller = build_controller(params, lambda n: build_policy(n, core.ctx))
    except ValueError:
        log.exception("ignoring invalid auto policy knob %r", params)
        return False
    if core.dispatcher.policy.name != controller.current:
        core.switch_policy(build_policy(controller.current, core.ctx), time.time())
    controller.attach(core)
    core.controller = controller
    log.info("policy handed to the meta-controller (%s)", params.get("selector", "rules"))
    return True


async def publish_switches(core: SchedulerCore, events: EventStream) -> None:
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
    for s in switches:
        log.info("controller switched %s -> %s (%s)", s.old, s.new, s.reason)


def switch_event(s: Switch) -> PolicySwitched:
    view = json.dumps(s.view, sort_keys=True, separators=(",", ":"))
    return PolicySwitched(
        f"switch-{s.t:.6f}-{s.new}", s.t, s.old, s.new, s.reason, s.selector, view
    )
