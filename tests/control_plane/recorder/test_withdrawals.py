"""Requests that left the queue unserved get their rows: a queue timeout as `timeout`, a
client gone while queued as `withdrawn`. Before, only their gateway's loss made a row, so
reports missed every queue timeout (their `withdrawn` events were read and ignored)."""

from __future__ import annotations

import time

from control_plane.core.job import Slo
from control_plane.state import StateStores
from storage.db import Database
from storage.records import RequestRecord
from tests.control_plane.recorder.test_poison import eventually, recording
from tests.support.envelopes import envelope

NOW = time.time()


async def _queue(stores: StateStores, rid: str) -> None:
    env = envelope(rid, "acme", arrival=NOW, app="tutor", slo=Slo(ttft_s=0.5))
    await stores.requests.submit(
        env, request_id=rid, tenant="acme", gateway_id="gw1", queue_cap=10, now=NOW
    )


def _rows(db: Database) -> dict[str, RequestRecord]:
    with db.reader() as r:
        return {row.id: row for row in r.requests.list(limit=100)}


async def test_withdrawn_requests_are_recorded(stores: StateStores, db: Database) -> None:
    for rid in ("late", "gone", "served"):
        await _queue(stores, rid)
    assert await stores.requests.withdraw("late", now=NOW + 2, reason="queue_timeout")
    assert await stores.requests.withdraw("gone", now=NOW + 1, reason="client_disconnected")

    async with recording(stores, db):
        await eventually(lambda: _have(db, {"late", "gone"}))

    rows = _rows(db)
    assert set(rows) == {"late", "gone"}  # the queued one has ended nowhere yet
    late, gone = rows["late"], rows["gone"]
    assert (late.status, late.error, late.app, late.slo_violated) == (
        "timeout", "queue_timeout", "tutor", True,
    )  # fmt: skip
    assert (gone.status, gone.error, gone.slo_violated) == (
        "withdrawn",
        "client_disconnected",
        True,
    )
    assert (late.finished_at, late.dispatched_at, late.unified_cost) == (NOW + 2, None, 0.0)
    # recorded: their hashes go within a minute instead of the hour kept for the unrecorded
    ttl = await stores.redis.ttl(stores.keyspace.request("late"))
    assert 0 < ttl <= stores.requests.recorded_retention_s


async def _have(db: Database, ids: set[str]) -> bool:
    return ids <= set(_rows(db))
