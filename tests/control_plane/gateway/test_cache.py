"""The gateway's caches are single-flight (one load per expiry, however many callers wait) and
bounded: never more than their cap, never older than their TTL, never stale after a clear."""

from __future__ import annotations

import asyncio
import time

import pytest

from control_plane.gateway.cache import TtlCache


async def test_concurrent_misses_load_once() -> None:
    cache: TtlCache[str, int] = TtlCache(60)
    loads = 0

    async def load() -> int:
        nonlocal loads
        loads += 1
        await asyncio.sleep(0.01)
        return 42

    values = await asyncio.gather(*(cache.get_or_load("k", load) for _ in range(50)))
    assert values == [42] * 50 and loads == 1
    assert await cache.get_or_load("k", load) == 42 and loads == 1


async def test_failed_load_is_not_cached() -> None:
    cache: TtlCache[str, int] = TtlCache(60)

    async def boom() -> int:
        raise RuntimeError("sql down")

    with pytest.raises(RuntimeError):
        await cache.get_or_load("k", boom)

    async def ok() -> int:
        return 1

    assert await cache.get_or_load("k", ok) == 1


async def test_size_never_exceeds_cap_and_evicts_least_recently_used() -> None:
    cache: TtlCache[int, int] = TtlCache(60, max_entries=100)
    for i in range(100):
        cache.put(i, i)
    assert cache.get(0) == 0  # 0 is now the most recently used
    for i in range(100, 10_000):
        cache.put(i, i)
        assert len(cache) <= 100
    assert len(cache) == 100
    assert cache.get(1) is None and cache.get(0) is None  # both crowded out eventually
    assert [cache.get(i) for i in range(9_900, 10_000)] == list(range(9_900, 10_000))


async def test_lru_keeps_what_is_read() -> None:
    cache: TtlCache[str, int] = TtlCache(60, max_entries=2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1
    cache.put("c", 3)
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == (1, None, 3)


def test_entries_expire_and_are_dropped_when_read() -> None:
    cache: TtlCache[str, int] = TtlCache(0.05, max_entries=10)
    cache.put("k", 1)
    assert cache.contains("k")
    time.sleep(0.06)
    assert not cache.contains("k") and cache.get("k") is None
    assert len(cache) == 0


async def test_a_load_begun_before_clear_is_not_stored() -> None:
    cache: TtlCache[str, str] = TtlCache(60)
    started, release = asyncio.Event(), asyncio.Event()

    async def slow() -> str:
        started.set()
        await release.wait()
        return "stale"

    task = asyncio.create_task(cache.get_or_load("k", slow))
    await started.wait()
    cache.clear()  # e.g. the key was revoked meanwhile
    release.set()
    assert await task == "stale"  # the caller that asked before the change gets its answer
    assert cache.get("k") is None  # but nobody after it does

    async def fresh() -> str:
        return "fresh"

    assert await cache.get_or_load("k", fresh) == "fresh"


def test_bad_bounds_are_refused() -> None:
    with pytest.raises(ValueError, match="max_entries"):
        TtlCache(1.0, max_entries=0)
