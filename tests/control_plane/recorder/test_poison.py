"""Regression: one event that cannot become a row (a poison pill) must not stop accounting.

Before the fix, a `complete` event with priority 2**63 made every write of its batch fail
(`OverflowError: Python int too large to convert to SQLite INTEGER`, out of range on
PostgreSQL) and the recorder retried it forever: no later row was ever written. Now such an
event is dead-lettered with its reason, acknowledged, and everything around it is written; a
database outage, on the other hand, dead-letters nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from redis.asyncio import Redis

from control_plane.recorder import service
from control_plane.recorder.service import GROUP, Recorder
from control_plane.state import StateStores, StateUnavailable
from control_plane.state.tasks import stop_tasks
from storage import write_guard
from storage.db import Database
from storage.errors import StorageUnavailable
from storage.records import RequestRecord, RequestsWritten

NOW = time.time()


def complete(rid: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "complete",
        "id": rid,
        "status": "ok",
        "tenant": "acme",
        "app": "tutor",
        "agent": "math",
        "model": "m",
        "tier": 1,
        "arrival": NOW,
        "dispatched": NOW + 0.01,
        "first_token": NOW + 0.05,
        "finished": NOW + 0.5,
        "n_in": 10,
        "n_out": 20,
        "worker": "w1",
        **extra,
    }


async def publish(stores: StateStores, events: list[dict[str, Any]]) -> list[str]:
    """Append entries as any sender could write them (typed or not): raw JSON objects."""
    stream = stores.keyspace.events
    return [str(await stores.redis.xadd(stream, {"data": json.dumps(e)})) for e in events]


async def eventually(check: Callable[[], Awaitable[bool]], within_s: float = 20.0) -> None:
    deadline = time.monotonic() + within_s
    while not await check():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


def ids_in(db: Database) -> set[str]:
    with db.reader() as r:
        return {row.id for row in r.requests.list(limit=10_000)}


@contextlib.asynccontextmanager
async def recording(stores: StateStores, db: Database) -> AsyncIterator[Recorder]:
    recorder = Recorder(stores, db, "rec-1", batch=50, interval_s=0.05, claim_idle_s=60)
    task = asyncio.create_task(recorder.run())
    try:
        yield recorder
    finally:
        await stop_tasks([task])  # as the recorder's main does: a lost cancel is repeated


async def test_out_of_range_priority_is_dead_lettered_and_the_rest_is_written(
    stores: StateStores, db: Database, redis: Redis
) -> None:
    good = [f"g{i}" for i in range(10)]
    batch = [complete(rid) for rid in good[:5]]
    batch += [complete("poison-1", tier=2**63), complete("poison-2", tier=2**64 - 1)]
    batch += [complete(rid) for rid in good[5:]]
    poison_ids = await publish(stores, batch)  # one batch: the recorder reads it at once
    poison_ids = poison_ids[5:7]

    async with recording(stores, db) as recorder:
        await eventually(lambda: asyncio.to_thread(lambda: ids_in(db) == set(good)))
        await publish(stores, [complete("after")])  # later events flow as usual
        await eventually(lambda: asyncio.to_thread(lambda: "after" in ids_in(db)))
        await eventually(lambda: _pending_zero(stores))

        letters = await stores.dead_letters.list()
        assert sorted(letter.entry_id for letter in letters) == sorted(poison_ids)
        for letter in letters:
            assert letter.consumer == "recorder" and letter.kind == "write"
            assert letter.source == "events"
            assert "int" in letter.reason.lower() or "range" in letter.reason.lower()
            assert letter.fields["id"] in ("poison-1", "poison-2")
            assert letter.fields["tier"] in (2**63, 2**64 - 1)
        assert await stores.dead_letters.counts() == {"recorder:write": 2}
        assert recorder.metrics.dead_letters.labels("recorder", "write")._value.get() == 2
        assert recorder.dead_lettered == 2
        assert recorder.written == 11


async def test_a_replayed_batch_does_not_dead_letter_its_poison_pill_twice(
    stores: StateStores, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The batch's acknowledgement fails once (Redis gone for a moment, or the recorder dies
    there), so the batch is read again from the pending list: its rows are written again
    (ignored, same ids) and its poison pill must not be set aside a second time. Before, the
    dead letter and the acknowledgement were two writes and the replay added a second one."""
    await publish(stores, [complete("a"), complete("p", tier=2**63), complete("b")])
    real_ack = stores.events.ack
    failures = [StateUnavailable("redis unavailable: injected")]

    async def ack_failing_once(group: str, ids: list[str]) -> int:
        if failures:
            raise failures.pop()
        return await real_ack(group, ids)

    monkeypatch.setattr(stores.events, "ack", ack_failing_once)
    async with recording(stores, db) as recorder:
        await eventually(lambda: asyncio.to_thread(lambda: ids_in(db) == {"a", "b"}))
        await eventually(lambda: _pending_zero(stores))
        assert not failures, "the acknowledgement never failed: the test proves nothing"
        assert [x.fields["id"] for x in await stores.dead_letters.list()] == ["p"]
        assert await stores.dead_letters.counts() == {"recorder:write": 1}
        assert recorder.dead_lettered == 1


async def test_an_event_that_cannot_be_converted_is_dead_lettered(
    stores: StateStores, db: Database
) -> None:
    await publish(
        stores,
        [
            complete("bad", arrival=None),
            complete("ok1"),
            complete("bad2", n_in="many"),
            # a completion sent bare, without its sender: no row can be made, and it must not
            # vanish without a trace (before: acknowledged as if it were an orphan)
            {"type": "complete", "id": "bare", "status": "ok", "finished": NOW, "n_in": 1},
        ],
    )
    async with recording(stores, db) as recorder:
        await eventually(lambda: asyncio.to_thread(lambda: ids_in(db) == {"ok1"}))
        await eventually(lambda: _pending_zero(stores))
        letters = {x.entry_id: x for x in await stores.dead_letters.list()}
        kinds = sorted((x.kind, x.reason) for x in letters.values())
        assert kinds == [
            ("convert", "ValueError: arrival: required for a request row"),
            ("convert", "ValueError: sender: required for a request row"),
            ("decode", "not a valid event: n_in: expected an integer, got str"),
        ]
        assert recorder.metrics.dead_letters.labels("recorder", "convert")._value.get() == 2


async def test_a_withdrawal_whose_envelope_does_not_decode_keeps_it_in_its_dead_letter(
    stores: StateStores, db: Database
) -> None:
    """Regression: the dead letter said `"envelope": null`, so the row could not be rebuilt
    from it by hand."""
    bad = {"job": {"id": "w", "tenant": "acme"}, "weights": {}}  # no arrival, n_in, max_tokens
    await publish(stores, [{"type": "withdrawn", "id": "w", "reason": "queue_timeout",
                            "at": NOW, "attempts": 1, "envelope": bad}])  # fmt: skip
    async with recording(stores, db):
        await eventually(lambda: _any_dead_letter(stores))
        (letter,) = await stores.dead_letters.list()
    assert (letter.kind, letter.fields["id"]) == ("convert", "w")
    assert letter.fields["envelope"] == bad and "envelope.job" in letter.reason


async def test_an_entry_that_is_not_an_event_is_dead_lettered(
    stores: StateStores, db: Database, redis: Redis
) -> None:
    stream = stores.keyspace.events
    await redis.xadd(stream, {"data": "{not json"})
    await redis.xadd(stream, {"other": "field"})
    await redis.xadd(stream, {"data": "[1, 2]"})
    await publish(stores, [complete("fine")])
    async with recording(stores, db):
        await eventually(lambda: asyncio.to_thread(lambda: ids_in(db) == {"fine"}))
        await eventually(lambda: _pending_zero(stores))
        letters = await stores.dead_letters.list()
        assert [(x.consumer, x.kind) for x in letters] == [("recorder", "decode")] * 3
        assert {str(x.fields) for x in letters} == {
            str({"data": "{not json"}),
            str({"other": "field"}),
            str({"data": "[1, 2]"}),
        }


async def test_a_database_outage_dead_letters_nothing(
    stores: StateStores, db_url: str, redis: Redis
) -> None:
    """Against a database that refuses everything (here: not migrated yet, so every insert
    and the probe fail), nothing is dead-lettered or acknowledged; once it is back, every row,
    the poison pill's neighbours included, is written and only the poison pill is set aside."""
    await publish(stores, [complete("a"), complete("p", tier=2**63), complete("b")])
    db = Database(db_url)
    async with recording(stores, db) as recorder:
        await asyncio.sleep(2.5)  # several failed attempts
        assert await stores.dead_letters.list() == []
        assert await stores.events.pending_count(GROUP) == 3
        await asyncio.to_thread(db.migrate)
        await eventually(lambda: asyncio.to_thread(lambda: ids_in(db) == {"a", "b"}), 30)
        await eventually(lambda: _pending_zero(stores))
        assert [x.fields["id"] for x in await stores.dead_letters.list()] == ["p"]
        assert recorder.written == 2
    db.dispose()


async def test_an_unreachable_database_dead_letters_nothing(stores: StateStores) -> None:
    await publish(stores, [complete("a"), complete("p", tier=2**63)])
    db = Database("postgresql+psycopg://postgres@127.0.0.1:1/none?connect_timeout=1")
    async with recording(stores, db) as recorder:
        await asyncio.sleep(2.0)
        assert await stores.dead_letters.list() == []
        assert await stores.events.pending_count(GROUP) == 2
        assert recorder.written == 0
    db.dispose()


SWITCH = {
    "type": "policy_switched",
    "id": "switch-1",
    "t": NOW,
    "old": "fcfs",
    "new": "edf",
    "reason": "deadlines",
    "selector": "rules",
}


@pytest.mark.postgres
@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
async def test_a_read_only_database_dead_letters_nothing(stores: StateStores, db_url: str) -> None:
    """A PostgreSQL that answers reads and refuses every write (a standby after a fail-over,
    a managed server set read-only as its disk fills: SQLSTATE 25006, which psycopg raises as
    `InternalError`) is an outage, not rows at fault: nothing is dead-lettered or
    acknowledged, the controller's audit row included; on a writable database every row is
    written and only the poison pill is set aside. Before, every row was split off, refused
    alone, passed a read-only probe and was dead-lettered."""
    await asyncio.to_thread(lambda: Database(db_url).migrate())
    await publish(stores, [SWITCH, complete("a"), complete("p", tier=2**63), complete("b")])
    read_only = Database(f"{db_url}%20-cdefault_transaction_read_only%3Don")
    async with recording(stores, read_only) as recorder:
        await asyncio.sleep(2.5)  # several failed attempts
        assert await stores.dead_letters.list() == []
        assert await stores.events.pending_count(GROUP) == 4
        assert recorder.written == 0
    read_only.dispose()
    db = Database(db_url)
    async with recording(stores, db) as recorder:
        await eventually(lambda: asyncio.to_thread(lambda: ids_in(db) == {"a", "b"}), 30)
        await eventually(lambda: _pending_zero(stores))
        assert [x.fields["id"] for x in await stores.dead_letters.list()] == ["p"]
    with db.reader() as r:
        assert [e.action for e in r.audit.list(action="policy.switch")] == ["policy.switch"]
    db.dispose()


async def _any_dead_letter(stores: StateStores) -> bool:
    return bool(await stores.dead_letters.list())


async def _pending_zero(stores: StateStores) -> bool:
    pending = await stores.events.pending_count(GROUP)
    return bool(pending == 0)


@pytest.fixture
async def redis(stores: StateStores) -> Redis:
    return stores.redis


def audited(target: str, action: str = "worker.drain") -> dict[str, Any]:
    return {
        "type": "audited",
        "id": f"{action}-{target}",
        "t": NOW,
        "actor": "scheduler:s",
        "action": action,
        "target": target,
        "old": '{"status": "active"}',
        "new": '{"status": "draining"}',
        "reason": "ARBITER_WORKERS at takeover",
    }


@pytest.mark.postgres
@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
async def test_an_audit_row_the_database_refuses_is_set_aside_alone(
    stores: StateStores, db_url: str
) -> None:
    """PostgreSQL refuses an action longer than its column: that event alone is
    dead-lettered, the audit rows beside it in the batch are written (before: all of them
    were dead-lettered with it)."""
    db = Database(db_url)
    await asyncio.to_thread(db.migrate)
    ids = await publish(
        stores, [audited("worker:a"), audited("worker:b", "x" * 100), audited("worker:c")]
    )

    async def set_aside() -> bool:
        return bool(await stores.dead_letters.list()) and await _pending_zero(stores)

    async with recording(stores, db):
        await eventually(set_aside)  # pending is 0 before the first read, too
    assert [x.entry_id for x in await stores.dead_letters.list()] == [ids[1]]
    with db.reader() as r:
        assert sorted(e.target for e in r.audit.list(action="worker.drain")) == [
            "worker:a",
            "worker:c",
        ]
    db.dispose()


async def test_rows_written_before_an_outage_cut_a_split_batch_are_counted(
    stores: StateStores, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The poison pill splits the batch: `a` commits alone; then the database goes away while
    `b` and `c` are written, and the whole batch is retried. `arbiter_recorder_rows_written`
    counted a batch's rows at its end, so `a` (found written by the retry) was never counted."""
    await publish(stores, [complete("a"), complete("p", tier=2**63), complete("b"), complete("c")])
    real = write_guard.write_requests
    outages = [StorageUnavailable("OperationalError: injected")]

    def write_failing_once(
        database: Database, rows: list[RequestRecord], **options: Any
    ) -> RequestsWritten:
        if outages and {row.id for row in rows} == {"b", "c"}:
            raise outages.pop()
        return real(database, rows, **options)

    monkeypatch.setattr(service, "write_requests", write_failing_once)
    async with recording(stores, db) as recorder:
        await eventually(lambda: asyncio.to_thread(lambda: ids_in(db) == {"a", "b", "c"}))
        await eventually(lambda: _pending_zero(stores))
        assert not outages, "the outage never came: the test proves nothing"
        assert recorder.written == 3
        assert recorder.metrics.rows_written._value.get() == 3
