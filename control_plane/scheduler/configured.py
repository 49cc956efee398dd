"""The workers a scheduler's settings name (`ARBITER_WORKERS`), reconciled with the registry
whenever a scheduler takes the lead."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

from control_plane.contracts.workers import CONFIG, CONFIG_REMOVED, WorkerEntry
from control_plane.state.worker_registry import WorkerRegistry

log = logging.getLogger(__name__)


async def reconcile(registry: WorkerRegistry, listed: Sequence[WorkerEntry]) -> None:
    """Make the registry follow the settings for the entries the settings own.

    Rule: a listed worker not registered is registered (origin `config`); a registered one is
    left as it is (an operator's drain survives) and, if it predates the `origin` field,
    claimed as `config`; a `config` entry the settings no longer list is drained, not removed
    (requests in flight on it finish; `DELETE /admin/workers/{id}` forgets it), and marked
    `config-removed`; such an entry listed again is made active. The admin API's entries are
    never touched, nor `arbiter up`'s or a worker's own unless the settings list them (then
    they are claimed as above). Guarantee: no worker stays in service only because a
    scheduler's settings once named it."""
    wanted = {entry.id: entry for entry in listed}
    known = {entry.id: entry for entry in await registry.list()}
    for worker_id, entry in known.items():
        if worker_id in wanted:
            await _listed(registry, entry, wanted[worker_id])
        elif entry.origin == CONFIG:
            log.warning("worker %s is no longer in ARBITER_WORKERS: draining it", worker_id)
            await registry.upsert(WorkerEntry(worker_id, status="draining", origin=CONFIG_REMOVED))
    for worker_id, entry in wanted.items():
        if worker_id not in known:
            log.info("worker %s registered from ARBITER_WORKERS", worker_id)
            await registry.upsert(entry)


async def _listed(registry: WorkerRegistry, entry: WorkerEntry, wanted: WorkerEntry) -> None:
    if entry.origin == CONFIG_REMOVED:
        log.warning("worker %s is in ARBITER_WORKERS again: active", entry.id)
        await registry.upsert(replace(wanted, status="active"))
    elif entry.origin is None:
        await registry.upsert(WorkerEntry(entry.id, origin=CONFIG))
