"""Applying an operator's knob change to the leader's core, live.

Rule: `policy` = `auto` hands the choice to the meta-controller; any other policy pins it
(the controller detaches) and is switched only when it differs from the one in force;
`admission` and `placement` are replaced without touching the policy or its queue; `weights`
sets the node weights it names, and a node the previous value named and this one does not
(deleted) is back to weight 1, as a new leader building from the same knob has it (weights
that only requests' envelopes set are kept: `Weights.follow_knob`); `fairness` gives its α and
β to each policy the meta-controller builds that takes them, the running one rebuilt at once
(a pinned policy gets them in its params from the admin API). Guarantee: a choice that
cannot be built here — invalid, a plug-in module this host lacks, a plug-in whose own code
raises — is logged and ignored: the core keeps what it had, so a bad knob can never stop
scheduling.
"""

from __future__ import annotations

import logging

from control_plane.admission.registry import build_admission
from control_plane.contracts.knobs import Fairness, KnobValue, NodeWeights, PluginChoice
from control_plane.control.meta import AUTO
from control_plane.core.scheduler_core import SchedulerCore
from control_plane.placement.registry import build_placement
from control_plane.policies.registry import build_policy
from control_plane.scheduler.autopilot import fairness_of, follow_fairness, hand_over

log = logging.getLogger(__name__)


def apply_knob(core: SchedulerCore, name: str, value: KnobValue, now: float) -> None:
    """Apply one knob's value to `core` (see the module docstring); why one could not be is
    kept in `core.knob_errors` (the live view shows it) until a value of it is applied."""
    if name == "policy" and isinstance(value, PluginChoice) and value.name == AUTO:
        _noted(core, name, hand_over(core, dict(value.params)))
    elif name == "policy" and isinstance(value, PluginChoice):
        core.detach_controller()  # a pinned policy: the operator decides again
        current = core.dispatcher.policy
        if current.name == value.name and dict(value.params) == current.params.model_dump():
            return _noted(core, name, None)
        try:
            policy = build_policy(value.name, core.ctx, dict(value.params))
            core.switch_policy(policy, now)
            log.info("policy switched to %s", value.name)
            _noted(core, name, None)
        except Exception as exc:  # invalid here, or the plug-in's own code raised
            log.exception("ignoring policy knob %r: it cannot be built", value)
            _noted(core, name, refusal(value, exc))
    elif name in ("admission", "placement") and isinstance(value, PluginChoice):
        _swap_plugin(core, name, value)
    elif name == "fairness" and isinstance(value, Fairness):
        try:
            follow_fairness(core, fairness_of(value), now)
            _noted(core, name, None)
        except Exception as exc:  # the running policy's own code raised
            log.exception("ignoring fairness knob %r under auto", value)
            _noted(core, name, f"cannot be applied on the leader: {type(exc).__name__}: {exc}")
    elif name == "weights" and isinstance(value, NodeWeights):
        try:
            core.ctx.weights.follow_knob(dict(value.table))
        except ValueError:
            log.exception("ignoring invalid weights knob %r", value)


def _swap_plugin(core: SchedulerCore, kind: str, value: PluginChoice) -> None:
    """Replace admission or placement live; the policy and its queue are untouched."""
    dispatcher = core.dispatcher
    try:
        if kind == "admission":
            dispatcher.admission = build_admission(value.name, dict(value.params))
        else:
            dispatcher.placement = build_placement(value.name, dict(value.params))
        log.info("%s switched to %s", kind, value.name)
        _noted(core, kind, None)
    except Exception as exc:  # invalid here, or the plug-in's own code raised
        log.exception("ignoring %s knob %r: it cannot be built", kind, value)
        _noted(core, kind, refusal(value, exc))


def refusal(value: PluginChoice, exc: BaseException) -> str:
    """Why `value` was not applied, in one line for the live view."""
    return f"{value.name!r} cannot be built on the leader: {type(exc).__name__}: {exc}"[:500]


def _noted(core: SchedulerCore, name: str, error: str | None) -> None:
    if error is None:
        core.knob_errors.pop(name, None)
    else:
        core.knob_errors[name] = error
