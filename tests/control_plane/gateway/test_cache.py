"""The directory cache is single-flight: one load per expiry, however many callers wait."""

from __future__ import annotations

import asyncio

import pytest

from control_plane.gateway.directory import TtlCache


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
