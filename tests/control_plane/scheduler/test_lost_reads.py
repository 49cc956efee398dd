"""A leader read whose reply was lost (Redis ran it, the client had timed out: a stall) does not
lose what it delivered: the leader applies its own pending events before reading new ones."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from control_plane.contracts.events import Withdrawn
from control_plane.core.job import Job
from control_plane.scheduler.lending import LendingDesk
from control_plane.scheduler.rebuild import rebuild
from control_plane.scheduler.service import GROUP, SchedulerService
from control_plane.settings import Settings
from control_plane.state import StateStores, StateUnavailable
from control_plane.state.tasks import stop_tasks

NOW = 1_700_000_000.0


@pytest.fixture
async def service(redis_url: str) -> AsyncIterator[SchedulerService]:
    stores = StateStores.open(redis_url, "lost-reads")
    await stores.events.ensure_groups()
    svc = SchedulerService(Settings(redis_url=redis_url, cluster="lost-reads"), stores, "s1")
    svc.core = (await rebuild(stores, "vtc", NOW)).core
    svc.desk = LendingDesk(stores.lending, 0, enabled=False, per_worker=1)
    yield svc
    await svc.http.aclose()
    await stores.aclose()


async def test_events_delivered_by_a_read_whose_reply_was_lost_are_applied(
    service: SchedulerService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: the group had delivered the entries to this leader, which only ever read
    new ones: a lost batch waited for the next takeover (a withdrawn request kept its place in
    the queue, a completion its slot, and the events stream could not be trimmed past it)."""
    core = service.core
    assert core is not None
    for i in (1, 2):
        core.arrive(Job(id=f"j{i}", tenant="a", arrival=NOW, n_in=10, max_tokens=20), None, NOW)
    await service.stores.events.publish([Withdrawn("j1")])
    read = service.stores.events.read

    async def reply_lost(*args: Any, **kwargs: Any) -> Any:
        await read(*args, **kwargs)  # Redis ran it and delivered the entry to "s1"
        raise StateUnavailable("Timeout reading from the socket")

    monkeypatch.setattr(service.stores.events, "read", reply_lost)
    with pytest.raises(StateUnavailable):
        await service._events_loop()
    monkeypatch.setattr(service.stores.events, "read", read)
    await service.stores.events.publish([Withdrawn("j2")])
    loop = asyncio.create_task(service._events_loop())
    try:
        for _ in range(100):
            if not core.pending:
                break
            await asyncio.sleep(0.05)
        assert core.pending == {}
    finally:
        await stop_tasks([loop])
    assert await service.stores.events.pending_count(GROUP) <= 1  # j2's, acked with the next read
