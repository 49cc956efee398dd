"""An entry whose recording raises (a bug in the recorder's own code that one entry meets,
not an outage and not a row the database refuses) must not stop accounting: before, the
batch raised, was read again from the pending list first and raised again, so nothing after
it was ever recorded. Now the batch is split until that entry stands alone, and it is set
aside (kind `raised`) after `RAISE_TRIES` tries; an entry that raised once only is recorded.

The bug is put in by replacing the audit draft's builder for one id (every `audited` entry
that decodes is otherwise recorded: the decoding screen checks what the builder reads).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from control_plane.contracts.events import Audited, PolicySwitched
from control_plane.recorder import service
from control_plane.recorder.rows import audit_draft
from control_plane.state import StateStores
from storage.db import Database
from storage.write_guard import AuditDraft
from tests.control_plane.recorder.test_poison import (
    NOW,
    complete,
    eventually,
    ids_in,
    publish,
    recording,
)


def _audited(change_id: str, target: str) -> dict[str, Any]:
    return {"type": "audited", "id": change_id, "t": NOW, "actor": "scheduler",
            "action": "worker.drain", "target": target, "reason": "left the list"}  # fmt: skip


def _raising_for(mp: pytest.MonkeyPatch, change_id: str, times: int | None) -> list[int]:
    """Replace the draft builder so that building `change_id`'s draft raises (`times` times,
    or always); → a list whose length counts the raises."""
    raised: list[int] = []

    def draft(event: PolicySwitched | Audited) -> AuditDraft:
        if event.id == change_id and (times is None or len(raised) < times):
            raised.append(1)
            raise KeyError("a bug this entry meets")
        return audit_draft(event)

    mp.setattr(service, "audit_draft", draft)
    return raised


def _audit_targets(db: Database) -> list[str]:
    with db.reader() as r:
        return sorted(entry.target for entry in r.audit.list(limit=100))


async def _caught_up(stores: StateStores) -> bool:
    return (await stores.events.unconsumed())["recorder"] == 0


async def test_an_entry_whose_recording_always_raises_is_set_aside_and_the_rest_recorded(
    stores: StateStores, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(service, "RAISE_BACKOFF_S", 0.01)
    raised = _raising_for(monkeypatch, "bug", None)
    ids = await publish(
        stores, [complete("a"), _audited("bug", "w2"), complete("b"), _audited("fine", "w1")]
    )
    async with recording(stores, db) as recorder:
        await eventually(lambda: asyncio.to_thread(lambda: ids_in(db) == {"a", "b"}))
        await publish(stores, [complete("after")])
        await eventually(lambda: asyncio.to_thread(lambda: "after" in ids_in(db)))
        await eventually(lambda: _caught_up(stores))
        (letter,) = await stores.dead_letters.list()
        assert (letter.consumer, letter.kind, letter.entry_id) == ("recorder", "raised", ids[1])
        assert letter.reason == "KeyError: 'a bug this entry meets'"
        assert letter.fields["id"] == "bug" and letter.fields["type"] == "audited"
        assert recorder.metrics.dead_letters.labels("recorder", "raised")._value.get() == 1
    assert await asyncio.to_thread(_audit_targets, db) == ["w1"]  # "fine" only
    assert len(raised) >= service.RAISE_TRIES


async def test_an_entry_that_raised_once_is_recorded_and_not_set_aside(
    stores: StateStores, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(service, "RAISE_BACKOFF_S", 0.01)
    raised = _raising_for(monkeypatch, "once", 1)
    await publish(stores, [complete("a"), _audited("once", "w1"), complete("b")])
    async with recording(stores, db):
        await eventually(lambda: asyncio.to_thread(lambda: ids_in(db) == {"a", "b"}))
        await eventually(lambda: _caught_up(stores))
        assert await stores.dead_letters.list() == []
    assert await asyncio.to_thread(_audit_targets, db) == ["w1"]
    assert raised == [1]


async def test_a_policy_read_that_raises_does_not_stop_the_rows(
    stores: StateStores, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The policy named in the rows of never-granted requests is read before each batch; a
    bug there raised for every batch, so no row was written while it lasted."""

    async def broken(name: str) -> None:
        raise TypeError("a bug in reading the knob")

    monkeypatch.setattr(stores.knobs, "get", broken)
    await publish(stores, [complete("a"), complete("b")])
    async with recording(stores, db):
        await eventually(lambda: asyncio.to_thread(lambda: ids_in(db) == {"a", "b"}))
        await eventually(lambda: _caught_up(stores))
        assert await stores.dead_letters.list() == []


async def test_an_entry_whose_mark_raises_is_set_aside(
    stores: StateStores, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Marking a request recorded (its hash may then expire) came after the acknowledgement,
    so an entry whose mark raised was acknowledged already: not set aside, not counted, its
    hash never marked, seen only in a log line. The mark now comes first."""
    monkeypatch.setattr(service, "RAISE_BACKOFF_S", 0.01)
    real = stores.requests.mark_recorded

    async def mark(ids: list[str]) -> int:
        if "bug" in ids:
            raise KeyError("a bug this entry meets")
        return await real(ids)

    monkeypatch.setattr(stores.requests, "mark_recorded", mark)
    ids = await publish(stores, [complete("a"), complete("bug"), complete("b")])
    async with recording(stores, db) as recorder:
        await eventually(lambda: asyncio.to_thread(lambda: ids_in(db) == {"a", "b", "bug"}))
        await eventually(lambda: _caught_up(stores))
        await eventually(lambda: _letters(stores, 1))
        (letter,) = await stores.dead_letters.list()
        assert (letter.kind, letter.entry_id, letter.fields["id"]) == ("raised", ids[1], "bug")
        assert recorder.dead_lettered == 1


async def _letters(stores: StateStores, n: int) -> bool:
    return len(await stores.dead_letters.list()) == n
