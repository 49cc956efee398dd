"""`settle`: a round ends when every events reader has caught up (real redis-server)."""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest

from control_plane.bench.overhead_settle import settle
from control_plane.contracts.events import Progress
from control_plane.state import StateStores
from control_plane.state.events import EventStream

CLUSTER = "settle"


async def test_settle_waits_for_every_reader_to_consume_and_acknowledge(redis_url: str) -> None:
    stores = StateStores.open(redis_url, CLUSTER)
    events = stores.events
    await events.ensure_groups()
    ids = await events.publish([Progress(f"r{i}", i, 1.0) for i in range(5)])
    assert await settle(redis_url, "elsewhere") < 0.5  # another cluster's stream: nothing due

    async def readers() -> None:
        await asyncio.sleep(0.2)
        await events.read("scheduler", "s", block_ms=None)  # as the leader: applied, then
        await events.read("recorder", "r", block_ms=None)  # delivered, still pending …
        await asyncio.sleep(0.2)
        await events.ack("recorder", ids)  # … until its rows are written
        await events.read("scheduler", "s", block_ms=None, ack=ids)  # acknowledged by its next read

    consuming = asyncio.create_task(readers())
    waited = await settle(redis_url, CLUSTER)
    assert consuming.done() and 0.35 < waited < 2.0
    await stores.aclose()


async def test_settle_gives_up_when_a_reader_never_catches_up(redis_url: str) -> None:
    stores = StateStores.open(redis_url, CLUSTER + "-stuck")
    await stores.events.ensure_groups()
    await stores.events.publish([Progress("r", 1, 1.0)])
    with pytest.raises(TimeoutError):
        await settle(redis_url, CLUSTER + "-stuck", limit_s=0.2)
    await stores.aclose()


async def test_settle_gives_up_even_when_a_poll_drops_its_cancellation(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """redis-py on Python 3.11 can return a command's result and drop the cancellation that
    arrived with it (`control_plane/state/tasks.py`). A limit imposed by cancelling the loop
    then never ends it: this hung a clean-clone CI run in the test above."""
    stores = StateStores.open(redis_url, CLUSTER + "-dropped")
    await stores.events.ensure_groups()
    await stores.events.publish([Progress("r", 1, 1.0)])
    real = EventStream.unconsumed
    dropped: list[bool] = []

    async def dropping(self: EventStream) -> dict[str, int]:
        if dropped:
            return await real(self)
        with contextlib.suppress(asyncio.CancelledError):  # as `wait_for` may, on a reply
            await asyncio.sleep(0.05)
            return await real(self)
        dropped.append(True)  # the first cancellation only: the outer guard still works
        return await real(self)

    monkeypatch.setattr(EventStream, "unconsumed", dropping)
    started = time.perf_counter()
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(settle(redis_url, CLUSTER + "-dropped", limit_s=0.2), 10.0)
    assert time.perf_counter() - started < 2.0  # its own limit, not the outer guard
    await stores.aclose()
