"""Requests that left the queue unserved get their rows: a queue timeout as `timeout`, a
client gone while queued as `withdrawn`, one given up for want of a leader as `error`.
Before, only their gateway's loss made a row, so reports missed every queue timeout (their
`withdrawn` events were read and ignored)."""

from __future__ import annotations

import time

from control_plane.contracts.requests import Envelope
from control_plane.core.job import Slo
from control_plane.state import StateStores
from storage.db import Database
from storage.records import RequestRecord
from tests.control_plane.recorder.test_poison import eventually, recording
from tests.support.envelopes import envelope

NOW = time.time()


def _envelope(rid: str) -> Envelope:
    return envelope(rid, "acme", arrival=NOW, app="tutor", slo=Slo(ttft_s=0.5))


async def _queue(stores: StateStores, rid: str) -> None:
    await stores.requests.submit(
        _envelope(rid), request_id=rid, tenant="acme", gateway_id="gw1", queue_cap=10, now=NOW
    )


async def _withdraw(stores: StateStores, rid: str, reason: str, at: float) -> None:
    assert await stores.requests.withdraw(rid, now=at, reason=reason, envelope=_envelope(rid))


def _rows(db: Database) -> dict[str, RequestRecord]:
    with db.reader() as r:
        return {row.id: row for row in r.requests.list(limit=100)}


async def _have(db: Database, ids: set[str]) -> bool:
    return ids <= set(_rows(db))


async def test_withdrawn_requests_are_recorded(stores: StateStores, db: Database) -> None:
    for rid in ("late", "gone", "stranded", "bare", "served"):
        await _queue(stores, rid)
    await _withdraw(stores, "late", "queue_timeout", NOW + 2)
    await _withdraw(stores, "gone", "client_disconnected", NOW + 1)
    await _withdraw(stores, "stranded", "no_leader", NOW + 3)
    assert await stores.requests.withdraw("bare", now=NOW + 1, reason="submit_failed")

    async with recording(stores, db):
        await eventually(lambda: _have(db, {"late", "gone", "stranded"}))

    rows = _rows(db)
    assert set(rows) == {"late", "gone", "stranded"}  # no envelope, no row; one still queued
    late, gone, stranded = rows["late"], rows["gone"], rows["stranded"]
    assert (late.status, late.error, late.app, late.slo_violated) == (
        "timeout", "queue_timeout", "tutor", True,
    )  # fmt: skip
    assert (gone.status, gone.error) == ("withdrawn", "client_disconnected")
    assert (stranded.status, stranded.error) == ("error", "no_leader")  # its client got a 503
    assert (late.finished_at, late.dispatched_at, late.unified_cost, late.e2e_ms) == (
        NOW + 2, None, 0.0, None,
    )  # fmt: skip
    # recorded: their hashes go within a minute instead of the hour kept for the unrecorded
    ttl = await stores.redis.ttl(stores.keyspace.request("late"))
    assert 0 < ttl <= stores.requests.recorded_retention_s
    assert await stores.redis.ttl(stores.keyspace.request("bare")) > 60  # as before: unrecorded
