"""Building a leader's in-memory state from Redis (on start and on every takeover)."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from control_plane.admission.registry import build_admission
from control_plane.contracts.checkpoints import LeaderState
from control_plane.contracts.knobs import JsonValue, KnobValue, NodeWeights, PluginChoice, knob_of
from control_plane.contracts.requests import RecordError, RequestRecord
from control_plane.control.meta import AUTO, AutoParams
from control_plane.core.dispatcher import Dispatcher
from control_plane.core.job import Job
from control_plane.core.ledger import Ledger
from control_plane.core.policy import PolicyContext
from control_plane.core.scheduler_core import SchedulerCore
from control_plane.placement.registry import build_placement
from control_plane.policies.registry import build_policy
from control_plane.scheduler.workers import sync_workers
from control_plane.state import StateStores

log = logging.getLogger(__name__)

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
) -> SchedulerCore:
    """A core with the policy/admission/placement the knobs name (invalid knobs → defaults)."""
    ctx = PolicyContext(ledger=ledger)
    pol = knob_of(knobs, "policy", PluginChoice) or PluginChoice(default_policy)
    adm = knob_of(knobs, "admission", PluginChoice) or DEFAULT_ADMISSION
    plc = knob_of(knobs, "placement", PluginChoice) or DEFAULT_PLACEMENT
    try:
        if pol.name == AUTO:  # the controller starts from its initial policy (service.py)
            policy = build_policy(AutoParams.model_validate(dict(pol.params)).initial, ctx)
        else:
            policy = build_policy(pol.name, ctx, dict(pol.params))
    except ValueError:
        log.exception("policy knob %r is invalid; using %s", pol, default_policy)
        policy = build_policy(default_policy, ctx)
    dispatcher = Dispatcher(
        policy,
        build_admission(adm.name, dict(adm.params)),
        build_placement(plc.name, dict(plc.params)),
    )
    core = SchedulerCore(dispatcher, failure_cooldown_s)
    weights = knob_of(knobs, "weights", NodeWeights)
    for node, weight in (weights.table if weights else {}).items():
        ctx.weights.set(node, weight)
    return core


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


async def rebuild(
    stores: StateStores, default_policy: str, now: float, failure_cooldown_s: float = 5.0
) -> SchedulerCore:
    """Ledger from the checkpoint, knobs, workers, in-flight and queued requests from Redis."""
    saved = await stores.checkpoints.load_leader() or LeaderState()
    ledger = Ledger() if saved.ledger is None else Ledger.from_snapshot(dict(saved.ledger))
    core = build_core(await stores.knobs.get_all(), ledger, default_policy, failure_cooldown_s)
    sync_workers(core, await stores.workers.list())
    n_out_seen = saved.running_n_out
    inflight = await stores.requests.inflight()
    for record in await stores.requests.load_many(list(inflight)):
        parsed = job_from_record(record)
        if parsed is not None:
            job, _ = parsed
            job.n_out = int(n_out_seen.get(job.id, 0))
            core.adopt_running(job, inflight[job.id], now)
    _restore(core, saved.dispatcher)
    queued = [p for r in await stores.requests.load_queued() if (p := job_from_record(r))]
    core.adopt_pending(queued, now)
    log.info(
        "rebuilt: %d queued, %d in flight, %d workers",
        len(core.pending),
        len(core.running),
        len(core.workers),
    )
    return core
