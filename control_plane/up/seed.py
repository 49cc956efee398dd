"""What `arbiter up` writes before starting the services: demo tenants, models, workers."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from control_plane.contracts.workers import WorkerEntry
from control_plane.state import StateStores
from storage.db import Database
from workers.engine.profile import LatencyProfile

RETIRED = "registered by an earlier `arbiter up` of this state directory, not started by this one"


def ensure_demo_tenants(db: Database, names: list[str], known: dict[str, str]) -> dict[str, str]:
    """Create missing tenants with one key each; reuse keys from a previous run when valid."""
    keys: dict[str, str] = {}
    with db.repos() as r:
        for name in names:
            if r.tenants.get_tenant(name=name) is None:
                r.tenants.create_tenant(name=name)
            old = known.get(name)
            owner = r.keys.resolve(plaintext=old) if old else None
            if old and owner is not None and owner.name == name:
                keys[name] = old
            else:
                _, keys[name] = r.keys.create(tenant=name, label="arbiter up")
    return keys


def register_model(db: Database, profile: LatencyProfile) -> None:
    """The profile's model in the registry (its shape prices tokens in Unified Tokens)."""
    m = profile.model
    with db.repos() as r:
        if r.models.get(name=m.name) is None:
            r.models.upsert(
                name=m.name,
                kind=m.kind,
                hidden_size=m.hidden_size,
                num_layers=m.num_layers,
                max_model_len=m.max_model_len,
                image_tokens=m.image_tokens.model_dump() if m.image_tokens else None,
                generation=m.generation.model_dump() if m.generation else None,
            )


async def register_workers(
    db: Database, stores: StateStores, workers: list[dict[str, Any]]
) -> None:
    """Workers in SQL (durable) and in the Redis registry (what the scheduler reads)."""
    with db.repos() as r:
        for w in workers:
            r.workers.register(
                worker_id=w["id"],
                url=w["url"],
                kind=w["kind"],
                model=w["model"],
                profile=w.get("profile"),
                max_num_seqs=w.get("max_num_seqs"),
            )
    for w in workers:
        entry = WorkerEntry(
            w["id"],
            w["url"],
            "active",
            w["model"],
            w["kind"],
            w.get("profile"),
            w.get("max_num_seqs"),
        )
        await stores.workers.upsert(entry)


async def retire_workers(db: Database, stores: StateStores, worker_ids: Iterable[str]) -> list[str]:
    """Forget, in SQL (with an audit row) and in the Redis registry, workers an earlier `arbiter
    up` of this state directory registered and this one does not start; the ids it forgot.

    Their processes are gone, and the port in a stale entry's URL may since be another worker's:
    the scheduler would count that worker's slots twice.
    """
    retired: list[str] = []
    for worker_id in worker_ids:
        known = await stores.workers.get(worker_id) is not None
        with db.repos() as r:
            old = r.workers.get(worker_id=worker_id)
            if old is None and not known:
                continue
            r.workers.remove(worker_id=worker_id)
            r.audit.append(  # as the admin API's delete writes it
                actor="arbiter up",
                action="worker.delete",
                target=f"worker:{worker_id}",
                old=None if old is None else dataclasses.asdict(old),
                new=None,
                reason=RETIRED,
            )
        await stores.workers.remove(worker_id)
        retired.append(worker_id)
    return retired
