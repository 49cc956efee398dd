"""Publishing a committed weight to the `weights` knob, over a real Redis."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from control_plane.admin.live_sync import WeightUnsettled, publish_committed_weight
from control_plane.contracts.knobs import NodeWeights
from control_plane.state import StateStores


@pytest.fixture
async def stores(redis_url: str) -> AsyncIterator[StateStores]:
    opened = StateStores.open(redis_url, "live-sync")
    try:
        yield opened
    finally:
        await opened.aclose()


async def test_the_knob_ends_on_the_weight_sql_holds_after_the_write(
    stores: StateStores,
) -> None:
    """A read before the write saw an older weight; the read after it sees a newer commit, so
    the publication writes again."""
    reads = iter([2.0, 7.0, 7.0, 7.0])

    async def committed() -> float | None:
        return next(reads)

    await publish_committed_weight(stores.knobs, ("acme", "chat"), committed)
    assert await stores.knobs.get("weights") == NodeWeights({("acme", "chat"): 7.0})


async def test_a_deleted_node_drops_its_entry_and_its_descendants(stores: StateStores) -> None:
    await publish_committed_weight(stores.knobs, ("acme", "chat"), _const(3.0))
    await publish_committed_weight(stores.knobs, ("other",), _const(2.0))
    await publish_committed_weight(stores.knobs, ("acme",), _const(None))
    assert await stores.knobs.get("weights") == NodeWeights({("other",): 2.0})


async def test_a_weight_that_keeps_changing_is_reported_not_published_forever(
    stores: StateStores,
) -> None:
    count = 0

    async def changing() -> float | None:
        nonlocal count
        count += 1
        return float(count)

    with pytest.raises(WeightUnsettled, match="acme kept changing"):
        await publish_committed_weight(stores.knobs, ("acme",), changing, attempts=3)
    assert count == 6


def _const(weight: float | None) -> Callable[[], Awaitable[float | None]]:
    async def read() -> float | None:
        return weight

    return read
