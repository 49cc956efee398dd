"""Every consumer's dead letters reach Prometheus through the leader: before, only the
recorder's were exported, and the scheduler's and gateways' were seen only by polling
`GET /admin/dead-letters`."""

from __future__ import annotations

import asyncio
import uuid

from prometheus_client import CollectorRegistry, generate_latest

from control_plane.scheduler.dead_letter_counts import DeadLetterCounts
from control_plane.scheduler.service import SchedulerService
from control_plane.settings import Settings
from control_plane.state import StateStores
from control_plane.state.tasks import stop_tasks
from tests.support.waiting import until

KEPT = "arbiter_dead_letters_kept_total"


async def _set_aside(stores: StateStores, consumer: str, kind: str, entry_id: str) -> None:
    await stores.dead_letters.add(
        consumer=consumer, kind=kind, reason="test", source="s", entry_id=entry_id, fields={}
    )


def _kept(registry: CollectorRegistry, consumer: str, kind: str) -> float | None:
    return registry.get_sample_value(KEPT, {"consumer": consumer, "kind": kind})


async def test_the_counts_follow_redis_and_clear_leaves_none(redis_url: str) -> None:
    stores = StateStores.open(redis_url, f"dlc-{uuid.uuid4().hex[:8]}")
    counts = DeadLetterCounts(every_s=0.05)
    registry = CollectorRegistry()
    registry.register(counts)
    follow = asyncio.create_task(counts.follower(stores.dead_letters)())
    try:
        await _set_aside(stores, "gateway", "grant", "1-1")
        await _set_aside(stores, "gateway", "grant", "1-2")
        await _set_aside(stores, "scheduler", "apply", "1-3")
        await until(lambda: _kept(registry, "gateway", "grant") == 2.0, 5.0)
        assert _kept(registry, "scheduler", "apply") == 1.0
        assert _kept(registry, "recorder", "write") is None
    finally:
        await stop_tasks([follow])
        await stores.aclose()
    counts.clear()
    assert _kept(registry, "gateway", "grant") is None


async def test_a_follower_of_an_ended_term_sets_nothing(redis_url: str) -> None:
    """A read that was under way when the term ended must not bring the counts back."""
    stores = StateStores.open(redis_url, f"dlc-{uuid.uuid4().hex[:8]}")
    counts = DeadLetterCounts(every_s=0.05)
    registry = CollectorRegistry()
    registry.register(counts)
    await _set_aside(stores, "gateway", "grant", "1-1")
    ended = counts.follower(stores.dead_letters)
    counts.clear()
    follow = asyncio.create_task(ended())
    try:
        await asyncio.sleep(0.3)
        assert _kept(registry, "gateway", "grant") is None
    finally:
        await stop_tasks([follow])
        await stores.aclose()


async def test_only_the_leader_exports_them_and_a_bad_count_ends_no_term(redis_url: str) -> None:
    """A count field written by hand (not a number) is left out; before, its ValueError ended
    the follower's task, hence the term, at every takeover: no replica kept leading."""
    cluster = f"dlc-{uuid.uuid4().hex[:8]}"
    stores = StateStores.open(redis_url, cluster)
    await _set_aside(stores, "scheduler", "apply", "1-1")
    await stores.redis.hset(stores.keyspace.dead_letter_counts, "gateway:grant", "x")
    service = SchedulerService(Settings(redis_url=redis_url, cluster=cluster), stores, "s1")
    registry = service.metrics.registry
    runner = asyncio.create_task(service.run())
    try:
        await until(lambda: _kept(registry, "scheduler", "apply") == 1.0, 10.0)
        token = service.fencing_token
        await asyncio.sleep(1.0)
        assert service.leading and service.fencing_token == token  # the same term
        assert _kept(registry, "gateway", "grant") is None
    finally:
        await stop_tasks([runner])
        await service.http.aclose()
        await stores.aclose()
    assert _kept(registry, "scheduler", "apply") is None  # no longer leading
    assert "arbiter_dead_letters_kept" not in generate_latest(registry).decode()
