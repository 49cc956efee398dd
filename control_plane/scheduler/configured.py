"""The workers a scheduler's settings name (`ARBITER_WORKERS`), reconciled with the registry
whenever a scheduler takes the lead."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import replace

from control_plane.contracts.events import Audited
from control_plane.contracts.workers import CONFIG, CONFIG_REMOVED, WorkerEntry
from control_plane.state import StateStores

log = logging.getLogger(__name__)
REASON = "ARBITER_WORKERS at takeover"


async def reconcile(stores: StateStores, listed: Sequence[WorkerEntry], actor: str) -> None:
    """Make the registry follow the settings for the entries the settings own.

    Rule: a listed worker not registered is registered (origin `config`); a registered one is
    left as it is (an operator's drain survives) and, if it predates the `origin` field,
    claimed as `config`; a `config` entry the settings no longer list is drained, not removed
    (requests in flight on it finish; `DELETE /admin/workers/{id}` forgets it), and marked
    `config-removed`; such an entry listed again is made active. The admin API's entries are
    never touched, nor `arbiter up`'s or a worker's own unless the settings list them (then
    they are claimed as above). Each change is a compare-and-set on what it was decided on
    (`WorkerRegistry.create`, `.update`): a worker removed or registered through the admin
    API meanwhile is left as that newer change left it (before, a `DELETE` racing the drain
    left an entry with no URL). Guarantee: no worker stays in service only because a
    scheduler's settings once named it, and each registration, drain and reactivation is
    published as an `audited` event from `actor` (the recorder writes the audit row; one
    publish after the changes, so a Redis lost in between loses the row, not the change)."""
    wanted = {entry.id: entry for entry in listed}
    known = {entry.id: entry for entry in await stores.workers.list()}
    changes: list[tuple[str, WorkerEntry | None, WorkerEntry]] = []
    for worker_id, entry in known.items():
        if worker_id in wanted:
            changes += await _listed(stores, entry, wanted[worker_id])
        elif entry.origin == CONFIG:
            drained = WorkerEntry(worker_id, status="draining", origin=CONFIG_REMOVED)
            if await stores.workers.update(drained, origin=CONFIG):
                log.warning("worker %s is no longer in ARBITER_WORKERS: drained", worker_id)
                changes.append(("worker.drain", entry, replace(entry, status="draining")))
    for worker_id, entry in wanted.items():
        if worker_id not in known and await stores.workers.create(entry):
            log.info("worker %s registered from ARBITER_WORKERS", worker_id)
            changes.append(("worker.register", None, entry))
    if changes:
        now = time.time()
        await stores.events.publish([_audited(actor, now, *change) for change in changes])


async def _listed(
    stores: StateStores, entry: WorkerEntry, wanted: WorkerEntry
) -> list[tuple[str, WorkerEntry | None, WorkerEntry]]:
    if entry.origin == CONFIG_REMOVED:
        active = replace(wanted, status="active")
        if await stores.workers.update(active, origin=CONFIG_REMOVED):
            log.warning("worker %s is in ARBITER_WORKERS again: active", entry.id)
            return [("worker.undrain", entry, active)]
    elif entry.origin is None:
        await stores.workers.update(WorkerEntry(entry.id, origin=CONFIG), origin=None)
    return []


def _audited(
    actor: str, now: float, action: str, old: WorkerEntry | None, new: WorkerEntry
) -> Audited:
    """As the admin API audits the same actions: target `worker:<id>`, the entry registered,
    or the status before and after."""
    if old is None:
        before, after = None, {"url": new.url, "max_num_seqs": new.max_num_seqs}
    else:
        before, after = {"status": old.status or "active"}, {"status": new.status}
    return Audited(
        id=f"{action}-{new.id}-{now:.6f}",
        t=now,
        actor=actor,
        action=action,
        target=f"worker:{new.id}",
        old=json.dumps(before),
        new=json.dumps(after),
        reason=REASON,
    )
