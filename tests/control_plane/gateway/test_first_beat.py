"""A gateway replica whose first beat failed is registered by its first
submit (submit.lua), so the sweeper can release its requests before it ever beats; its
`Liveness` must then say that its requests may have been released."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from control_plane.gateway.heartbeat import Liveness, beat_once
from control_plane.scheduler.sweeper import GatewaySweeper
from control_plane.state import StateStores
from tests.control_plane.scheduler.test_sweeper import NOW, WORKER, _core, _job, _submit


@pytest.fixture
async def stores(redis_url: str) -> AsyncIterator[StateStores]:
    s = StateStores.open(redis_url, "first-beat")
    await s.events.ensure_groups()
    await s.workers.upsert(WORKER)
    yield s
    await s.aclose()


async def test_a_request_released_before_the_first_beat_makes_its_grant_suspect(
    stores: StateStores,
) -> None:
    liveness = Liveness(5.0)  # its startup beat failed (Redis unreachable then)
    epoch = liveness.epoch  # what `submit_flight` records for the flight
    await _submit(stores, _job("early", "a", NOW), "gw-new")  # Redis is back: stored
    assert await stores.requests.grant("early", worker_id="w1", worker_url="u", now=NOW)

    # the replica's next beat is late (its heartbeat timed out in the stall): the leader
    # sees a registered replica without its liveness key
    released = await GatewaySweeper(stores, confirm_s=0.0).sweep(_core(), NOW + 3)
    assert [(r.request_id, r.status) for r in released] == [("early", "aborted")]

    assert await beat_once(stores.gateways, "gw-new", 5.0, liveness)
    # the grant it reads now must be checked in Redis before its worker is opened
    assert liveness.suspect(epoch), "a released request's grant is served: worker over-committed"


def test_before_any_answered_beat_a_request_is_suspect() -> None:
    liveness = Liveness(5.0)
    assert liveness.suspect(liveness.epoch)
