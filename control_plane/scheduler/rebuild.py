"""Building a leader's in-memory state from Redis (on start and on every takeover)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from control_plane.admission.registry import build_admission
from control_plane.contracts.checkpoints import LeaderState
from control_plane.contracts.knobs import (
    Fairness,
    JsonValue,
    KnobValue,
    NodeWeights,
    PluginChoice,
    knob_of,
)
from control_plane.contracts.requests import RecordError, RequestRecord
from control_plane.control.meta import AUTO, MetaController, build_controller
from control_plane.core.dispatcher import Dispatcher
from control_plane.core.job import Job
from control_plane.core.ledger import Ledger
from control_plane.core.live_windows import LiveWindows
from control_plane.core.policy import Policy, PolicyContext
from control_plane.core.scheduler_core import SchedulerCore
from control_plane.placement.registry import build_placement
from control_plane.policies.registry import build_policy
from control_plane.scheduler.autopilot import auto_builder, carried, fairness_of
from control_plane.scheduler.knob_changes import refusal
from control_plane.scheduler.workers import sync_workers
from control_plane.state import StateStores

log = logging.getLogger(__name__)
T = TypeVar("T")

# Live, the scheduler's own in-flight count is exact while scraped `waiting` lags by up to a
# scrape interval; refusing a worker on a stale `waiting > 0` would idle it for that long.
DEFAULT_ADMISSION = PluginChoice("capacity", {"skip_waiting": False})
DEFAULT_PLACEMENT = PluginChoice("least_loaded")


def job_from_record(record: RequestRecord) -> tuple[Job, dict[str, float]] | None:
    """The Job and weights of a stored request record (None, logged, if it cannot be parsed)."""
    try:
        return record.job()
    except RecordError as exc:
        log.warning("request %s skipped: %s", record.id, exc)
        return None


def build_core(
    knobs: Mapping[str, KnobValue],
    ledger: Ledger,
    default_policy: str,
    failure_cooldown_s: float = 5.0,
    saved: LeaderState | None = None,
) -> SchedulerCore:
    """A core with the policy/admission/placement the knobs name (knobs that cannot be built
    here — invalid, a module this host lacks, a plug-in that raises — → defaults, logged).

    Under `auto` the core gets the controller back: built from the knob's params, its state
    restored from `saved` when those params are the same, running the policy the previous
    leader ran (if it is in the controller's pool), else the controller's `initial` one.
    """
    ctx = PolicyContext(ledger=ledger)
    pol = knob_of(knobs, "policy", PluginChoice) or PluginChoice(default_policy)
    adm = knob_of(knobs, "admission", PluginChoice) or DEFAULT_ADMISSION
    plc = knob_of(knobs, "placement", PluginChoice) or DEFAULT_PLACEMENT
    controller: MetaController | None = None
    errors: dict[str, str] = {}
    carry = fairness_of(knob_of(knobs, "fairness", Fairness))

    def build(name: str) -> Policy:
        return build_policy(name, ctx, carried(name, carry))

    try:
        if pol.name == AUTO:
            controller = build_controller(dict(pol.params), build)
            policy = build(_resumed(controller, saved))
        else:
            policy = build_policy(pol.name, ctx, dict(pol.params))
    except Exception as exc:  # invalid here, or a plug-in's own code raised: never stop the term
        log.exception("policy knob %r cannot be built; using %s", pol, default_policy)
        errors["policy"] = refusal(pol, exc)
        controller, policy = None, build_policy(default_policy, ctx)
    dispatcher = Dispatcher(
        policy,
        _plugin("admission", adm, DEFAULT_ADMISSION, build_admission, errors),
        _plugin("placement", plc, DEFAULT_PLACEMENT, build_placement, errors),
    )
    core = SchedulerCore(dispatcher, failure_cooldown_s)
    core.knob_errors, core.fairness = errors, carry
    core.watch = LiveWindows(ledger.window_s, ledger.bucket_s)  # for the live view
    if controller is not None and saved is not None:
        _restore_controller(controller, saved.controller)
    if controller is not None:
        controller.build = auto_builder(core)  # follows the fairness knob from now on
        controller.attach(core)
        core.controller = controller
    weights = knob_of(knobs, "weights", NodeWeights)
    try:
        ctx.weights.follow_knob(dict(weights.table) if weights else {})
    except ValueError:
        log.exception("weights knob %r is invalid; ignored", weights)
    return core


def _plugin(
    kind: str,
    choice: PluginChoice,
    default: PluginChoice,
    build: Callable[[str, dict[str, Any]], T],
    errors: dict[str, str],
) -> T:
    """The admission or placement (`kind`) `choice` names, else `default` (logged, and why
    kept in `errors`): a knob this build or host cannot build — a plug-in module the
    scheduler's image lacks, params an older build took — must not stop every takeover."""
    try:
        return build(choice.name, dict(choice.params))
    except Exception as exc:
        log.exception("%s knob %r cannot be built; using %s", kind, choice, default)
        errors[kind] = refusal(choice, exc)
        return build(default.name, dict(default.params))


def _resumed(controller: MetaController, saved: LeaderState | None) -> str:
    """The policy a restored controller runs: the previous leader's, when in the pool."""
    snapshot = saved.dispatcher if saved is not None else None
    policy = snapshot.get("policy") if isinstance(snapshot, dict) else None
    name = policy.get("name") if isinstance(policy, dict) else None
    return name if isinstance(name, str) and name in controller.pool else controller.current


def _restore_controller(controller: MetaController, saved: JsonValue) -> None:
    if isinstance(saved, dict) and saved.get("params") == controller.params:
        try:
            controller.restore(saved.get("state"))
        except (KeyError, ValueError, TypeError, OverflowError):
            log.warning("could not restore the previous leader's controller; starting it fresh")


def _restore(core: SchedulerCore, saved: JsonValue) -> None:
    """Reload the previous leader's plug-in state when the same policy is configured."""
    if not isinstance(saved, dict):
        return
    policy = saved.get("policy")
    if not isinstance(policy, dict) or policy.get("name") != core.dispatcher.policy.name:
        return
    try:
        core.dispatcher.restore(saved)
    except (KeyError, ValueError, TypeError):
        log.warning("could not restore the previous leader's dispatcher state; starting fresh")


@dataclass(frozen=True, slots=True)
class Rebuilt:
    """A new leader's core, and the `arrivals` entry its queue and in-flight map were read at
    (`TakeoverView`): the first submissions up to it are in the core already (as queued, in
    flight, or gone) and are skipped."""

    core: SchedulerCore
    arrivals_tail: str
    events_checkpointed: str
    """The last `events` entry the restored checkpoint reflects (`LeaderState`)."""


def _restored_ledger(snapshot: Mapping[str, Any]) -> Ledger:
    """The predecessor's ledger; a snapshot that cannot be restored is logged and replaced by
    an empty ledger, since a leader that cannot take over would stop all scheduling."""
    try:
        return Ledger.from_snapshot(dict(snapshot))
    except (KeyError, ValueError, TypeError, OverflowError, AttributeError):
        log.exception("the previous leader's ledger cannot be restored; starting a fresh one")
        return Ledger()


async def rebuild(
    stores: StateStores, default_policy: str, now: float, failure_cooldown_s: float = 5.0
) -> Rebuilt:
    """Ledger from the checkpoint, knobs, workers, in-flight and queued requests from Redis."""
    saved = await stores.checkpoints.load_leader() or LeaderState()
    ledger = Ledger() if saved.ledger is None else _restored_ledger(saved.ledger)
    knobs = await stores.knobs.get_all()
    core = build_core(knobs, ledger, default_policy, failure_cooldown_s, saved)
    try:  # before in-flight jobs are labelled
        core.dispatcher.restore_learning(saved.dispatcher)
    except (KeyError, ValueError, TypeError, OverflowError):
        log.warning("could not restore what the previous leader had learnt; starting fresh")
    sync_workers(core, await stores.workers.list())
    n_out_seen = saved.running_n_out
    view = await stores.requests.takeover_view()
    for record in await stores.requests.load_many(list(view.inflight)):
        parsed = job_from_record(record)
        if parsed is not None:
            job, _ = parsed
            job.n_out = int(n_out_seen.get(job.id, 0))
            core.adopt_running(job, view.inflight[job.id], now)
    _restore(core, saved.dispatcher)
    core.adopt_pending([p for r in view.queued if (p := job_from_record(r))], now)
    log.info(
        "rebuilt: %d queued, %d in flight, %d workers",
        len(core.pending),
        len(core.running),
        len(core.workers),
    )
    return Rebuilt(core, view.arrivals_tail, saved.events_applied_to)
