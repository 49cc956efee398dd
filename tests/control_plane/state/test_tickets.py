"""A ticketed admin change whose reply was lost: the ticket tells whether it ran and what it
returned, so a change that is live is reported as done (its caller then commits its audit
row) and one that never ran, and no longer can, as the outage it was. Real Redis; only the
reply is lost, by a wrapper around the real script call."""

from __future__ import annotations

from typing import Any

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

from control_plane.contracts.knobs import PluginChoice
from control_plane.contracts.workers import WorkerEntry
from control_plane.state import KnobChanged, StateStores, StateUnavailable
from control_plane.state.scripts import Scripts

FIRST = PluginChoice("capacity", {"max_concurrency": 4})
LATER = PluginChoice("capacity", {"max_concurrency": 8})


def lose_replies(monkeypatch: pytest.MonkeyPatch, scripts: Scripts, runs: bool) -> None:
    """Each call's reply is lost (a reset): after Redis ran it (`runs`), or before it got there."""
    call = scripts.call

    async def lost(name: str, keys: Any, args: Any) -> Any:
        if runs:
            await call(name, keys, args)
        raise RedisConnectionError("Connection reset by peer")

    monkeypatch.setattr(scripts, "call", lost)


def retried(monkeypatch: pytest.MonkeyPatch, scripts: Scripts) -> None:
    """Each call runs, its reply is lost, and the client sends it again (a retry after a
    reset): the second run finds the ticket spent."""
    call = scripts.call

    async def twice(name: str, keys: Any, args: Any) -> Any:
        await call(name, keys, args)
        return await call(name, keys, args)

    monkeypatch.setattr(scripts, "call", twice)


async def _stored_text(stores: StateStores) -> str:
    await stores.knobs.replace("admission", FIRST, expected="")
    return (await stores.knobs.read("admission"))[1]


async def test_a_knob_change_that_ran_is_done_though_its_reply_was_lost(
    stores: StateStores, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = await _stored_text(stores)
    lose_replies(monkeypatch, stores.knobs._scripts, runs=True)
    version = await stores.knobs.replace("admission", LATER, expected=text)
    assert version == await stores.knobs.version()
    assert await stores.knobs.get("admission") == LATER


async def test_a_knob_change_retried_after_it_ran_is_done(
    stores: StateStores, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = await _stored_text(stores)
    retried(monkeypatch, stores.knobs._scripts)
    assert await stores.knobs.replace("admission", LATER, expected=text) > 0
    assert await stores.knobs.get("admission") == LATER


async def test_a_refused_knob_change_stays_refused_though_its_reply_was_lost(
    stores: StateStores, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _stored_text(stores)
    lose_replies(monkeypatch, stores.knobs._scripts, runs=True)
    with pytest.raises(KnobChanged):  # it ran, and found the knob changed since `expected`
        await stores.knobs.replace("admission", LATER, expected="")
    assert await stores.knobs.get("admission") == FIRST


async def test_a_knob_change_that_never_ran_is_an_outage(
    stores: StateStores, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = await _stored_text(stores)
    lose_replies(monkeypatch, stores.knobs._scripts, runs=False)
    with pytest.raises(StateUnavailable, match="reset"):
        await stores.knobs.replace("admission", LATER, expected=text, within_ms=100)
    assert await stores.knobs.get("admission") == FIRST


async def test_worker_changes_that_ran_are_done_though_their_replies_were_lost(
    stores: StateStores, monkeypatch: pytest.MonkeyPatch
) -> None:
    workers = stores.workers
    lose_replies(monkeypatch, workers._scripts, runs=True)
    await workers.upsert(WorkerEntry(id="w1", url="http://w1"), bounded=True)
    assert await workers.set_status("w1", "draining", bounded=True)
    assert not await workers.set_status("ghost", "draining", bounded=True)
    assert await workers.list() == [WorkerEntry(id="w1", url="http://w1", status="draining")]
    assert await workers.remove("w1", bounded=True)
    assert await workers.list() == []


async def test_a_worker_change_retried_after_it_ran_is_done(
    stores: StateStores, monkeypatch: pytest.MonkeyPatch
) -> None:
    retried(monkeypatch, stores.workers._scripts)
    await stores.workers.upsert(WorkerEntry(id="w1", url="http://w1"), bounded=True)
    assert await stores.workers.remove("w1", bounded=True)
    assert await stores.workers.list() == []
