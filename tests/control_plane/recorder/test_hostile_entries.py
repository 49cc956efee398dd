"""Entries and settings that stopped the recorder or lost a row, from a second review, on
real Redis and on SQLite and PostgreSQL: a task as long as the door accepts, an `audited`
value nested past the JSON parser's recursion limit, a `policy` knob that is not JSON, an
error text with U+0000. Each failed on the code before its fix."""

from __future__ import annotations

import asyncio
from typing import Any

from control_plane.contracts.knobs import PLUGIN_NAME_MAX
from control_plane.state import StateStores
from storage.db import Database
from storage.records import RequestRecord
from storage.repos.fields import is_name
from tests.control_plane.recorder.test_poison import (
    complete,
    eventually,
    ids_in,
    publish,
    recording,
)


async def _caught_up(stores: StateStores) -> bool:
    return (await stores.events.unconsumed())["recorder"] == 0


async def _recorded_row(stores: StateStores, db: Database, **fields: Any) -> RequestRecord:
    """Record a completion `r1` carrying `fields` beside a plain `r2`: both rows written,
    nothing dead-lettered; → `r1`'s row."""
    await publish(stores, [complete("r1", **fields), complete("r2")])
    async with recording(stores, db):
        await eventually(lambda: _caught_up(stores))
        assert await stores.dead_letters.list() == []
        assert await asyncio.to_thread(ids_in, db) == {"r1", "r2"}
    with db.reader() as r:
        row = r.requests.get(request_id="r1")
    assert row is not None
    return row


async def test_a_task_tag_the_door_accepts_is_recorded(stores: StateStores, db: Database) -> None:
    """`X-Arbiter-Task` is checked against the name rule (1–128 characters) at the door; the
    column was VARCHAR(64): PostgreSQL refused the row of every served request with a 65–128
    character task (dead-lettered), SQLite kept it (migration 0007)."""
    task = "t" * 100
    assert is_name(task)
    assert (await _recorded_row(stores, db, task=task)).task == task


async def test_a_deeply_nested_audited_value_does_not_stop_the_recorder(
    stores: StateStores, db: Database
) -> None:
    """An `audited` entry whose `old` nests deeper than the parser's recursion limit raised
    RecursionError past the events' decoding screen: every read of the group failed, for good
    (the entry stays pending and is re-read first). It is a bad entry, set aside."""
    deep = "[" * 100_000 + "]" * 100_000
    bad = {"type": "audited", "id": "x", "t": 1.0, "actor": "a", "action": "b",
           "target": "c", "reason": "r", "old": deep}  # fmt: skip
    await publish(stores, [bad, complete("after")])
    async with recording(stores, db):
        await eventually(lambda: asyncio.to_thread(lambda: "after" in ids_in(db)), within_s=10)
        await eventually(lambda: _caught_up(stores))


async def test_a_policy_knob_that_is_not_json_does_not_stop_the_recorder(
    stores: StateStores, db: Database
) -> None:
    """The recorder reads the `policy` knob before every batch; a stored text that is not
    JSON (a hand edit) raised there, so no batch was written while it stayed."""
    await stores.redis.hset(stores.keyspace.knobs, "policy", "vtc")  # not JSON text
    await publish(stores, [complete("r1")])
    async with recording(stores, db):
        await eventually(lambda: asyncio.to_thread(lambda: "r1" in ids_in(db)), within_s=10)


async def test_an_error_text_with_a_nul_is_recorded(stores: StateStores, db: Database) -> None:
    """PostgreSQL text cannot hold U+0000: a completion whose `error` carried one (a worker's
    error message may echo a client's input) was refused and dead-lettered there."""
    await publish(stores, [complete("n1", status="error", error="bad\x00byte")])
    async with recording(stores, db):
        await eventually(lambda: _caught_up(stores))
        await asyncio.sleep(0.5)
        assert await stores.dead_letters.list() == []
        assert await asyncio.to_thread(ids_in, db) == {"n1"}
    with db.reader() as r:
        row = r.requests.get(request_id="n1")
    assert row is not None and row.error == "bad\ufffdbyte"


async def test_a_policy_name_the_admin_api_accepts_is_recorded(
    stores: StateStores, db: Database
) -> None:
    """A policy may be named by its `module:Class` path, up to `PLUGIN_NAME_MAX` characters
    (the admin API's rule); the column was VARCHAR(64): PostgreSQL refused the row of every
    request served under a longer name (dead-lettered), SQLite kept it (migration 0008)."""
    policy = "my_company.scheduling.fairness.hierarchical:" + "P" * 150
    assert len(policy) <= PLUGIN_NAME_MAX
    assert (await _recorded_row(stores, db, policy=policy)).policy == policy


async def test_a_longer_policy_name_an_older_build_stored_is_cut_not_refused(
    stores: StateStores, db: Database
) -> None:
    """The generic knob endpoint of an older build took plug-in names of any length; such a
    policy still runs (its knob decodes), and its rows carry the name cut to the column."""
    policy = "my_company.scheduling:" + "P" * 250
    assert (await _recorded_row(stores, db, policy=policy)).policy == policy[:PLUGIN_NAME_MAX]
