"""The rolling live history: append, trim by age, read a range back, bounded nodes."""

from __future__ import annotations

import uuid

import pytest
from redis.asyncio import Redis

from control_plane.contracts.checkpoints import LiveView, NodeCount, PolicyState
from control_plane.core.ledger import Ledger
from control_plane.scheduler.history import HistoryTap, chosen_nodes
from control_plane.state import HistoryPoint, KeySpace, LiveHistory, StateStores

NOW = 1_700_000_000.0


@pytest.fixture
def history(redis: Redis) -> LiveHistory:
    return LiveHistory(redis, KeySpace(f"h{uuid.uuid4().hex[:8]}"), retention_s=60.0, max_nodes=3)


def _points(i: int) -> list[HistoryPoint]:
    return [
        HistoryPoint("alpha", service=10.0 * i, service_rate=2.0, counter=i, wait_p95_s=None),
        HistoryPoint("beta", service=5.0 * i, queued=i, inflight=1, slo_attainment_1m=0.5),
    ]


async def test_samples_read_back_as_written_oldest_first(history: LiveHistory) -> None:
    for i in range(4):
        assert await history.append(_points(i), NOW + 5 * i) is not None
    samples = await history.read(NOW + 5)
    assert [s.t for s in samples] == [NOW + 5, NOW + 10, NOW + 15]
    assert samples[-1].points == tuple(_points(3))
    assert [s.t for s in await history.read(NOW, NOW + 5)] == [NOW, NOW + 5]


async def test_entries_older_than_the_retention_are_trimmed(history: LiveHistory) -> None:
    for i in range(30):  # 150 s of samples at 5 s, retention 60 s
        await history.append(_points(i), NOW + 5 * i)
    kept = await history.read(0.0)
    assert await history.length() == len(kept) == 13  # [NOW + 85, NOW + 145]
    assert kept[0].t == NOW + 85 and kept[-1].t == NOW + 145


async def test_a_sample_not_newer_than_the_last_is_skipped(history: LiveHistory) -> None:
    assert await history.append(_points(1), NOW) is not None
    assert await history.append(_points(2), NOW - 1.0) is None  # a successor's clock behind
    assert [s.t for s in await history.read(0.0)] == [NOW]


async def test_nodes_per_sample_are_bounded(history: LiveHistory) -> None:
    too_many = [HistoryPoint(f"t{i}") for i in range(4)]
    with pytest.raises(ValueError, match="at most 3"):
        await history.append(too_many, NOW)
    assert await history.length() == 0


def test_the_leader_keeps_tenants_apps_then_the_busiest_agents() -> None:
    nodes = [
        NodeCount(("a", "x", "idle")),
        NodeCount(("a", "x", "busy"), service_rate=9.0),
        NodeCount(("a", "x", "queued"), queued=4),
        NodeCount(("a",)),
        NodeCount(("a", "x")),
    ]
    kept = [n.path for n in chosen_nodes(nodes, cap=4)]
    assert kept == [("a",), ("a", "x"), ("a", "x", "busy"), ("a", "x", "queued")]


async def test_the_tap_records_once_per_step(stores: StateStores) -> None:
    await stores.redis.delete(stores.live_history.key)
    ledger, tap = Ledger(), HistoryTap(step_s=5.0)
    nodes = (NodeCount(("alpha",), queued=2, service_rate=3.0, demand_rate=4.0),)
    for t in (0.0, 1.0, 4.9, 5.0, 6.0, 10.5):
        live = LiveView("leader", NOW + t, PolicyState("vtc"), nodes=nodes)
        await tap.record(stores.live_history, live, ledger)
    samples = await stores.live_history.read(0.0)
    assert [s.t - NOW for s in samples] == [0.0, 5.0, 10.5]
    assert samples[0].points == (HistoryPoint("alpha", 0.0, 3.0, 4.0, 0.0, 2, 0, None, None),)
