"""Recorders that died: what one read and never acknowledged is recorded by another once idle
past the claim horizon, and then the dead ones are forgotten (each process reads under a name
of its own: before, every restart left one consumer in the group for good)."""

from __future__ import annotations

import asyncio

from control_plane.recorder.service import GROUP, Recorder
from control_plane.state import StateStores
from control_plane.state.tasks import stop_tasks
from storage.db import Database
from tests.control_plane.recorder.test_poison import complete, eventually, ids_in, publish


async def _consumers(stores: StateStores) -> set[str]:
    return {c["name"] for c in await stores.redis.xinfo_consumers(stores.keyspace.events, GROUP)}


async def test_a_dead_recorders_entries_are_recorded_then_it_is_forgotten(
    stores: StateStores, db: Database
) -> None:
    await publish(stores, [complete("done")])
    for eid, _ in await stores.events.read(GROUP, "rec-gone", block_ms=None):
        await stores.events.ack(GROUP, [eid])  # recorded: holds nothing
    await publish(stores, [complete("a"), complete("b")])
    assert len(await stores.events.read(GROUP, "rec-dead", block_ms=None)) == 2  # never acked
    assert await _consumers(stores) == {"rec-gone", "rec-dead"}

    recorder = Recorder(stores, db, "rec-new", batch=50, interval_s=0.05, claim_idle_s=0.5)
    task = asyncio.create_task(recorder.run())
    try:
        await eventually(lambda: asyncio.to_thread(lambda: ids_in(db) == {"a", "b"}))
        await eventually(lambda: _consumers_are(stores, {"rec-new"}))
    finally:
        await stop_tasks([task])
    assert await stores.dead_letters.list() == []


async def _consumers_are(stores: StateStores, names: set[str]) -> bool:
    return await _consumers(stores) == names
