"""Bounded, time-limited memos for the gateway's request path (per process, no I/O).

Rule: nothing a request can name grows memory without bound. Every cache has a size cap
(least recently used entries are evicted first) and a TTL; expired entries are dropped when
read and are the first to be crowded out. Loads are single-flight per key.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class SingleFlight(Generic[K, V]):
    """Concurrent `do(key, load)` calls for one key share one `load` (and its outcome).

    Holds one future per key only while its load runs, so its size is bounded by the
    number of loads in flight.
    """

    def __init__(self) -> None:
        self._loading: dict[K, asyncio.Future[V]] = {}

    def __len__(self) -> int:
        return len(self._loading)

    async def do(self, key: K, load: Callable[[], Awaitable[V]]) -> V:
        pending = self._loading.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        fut: asyncio.Future[V] = asyncio.get_running_loop().create_future()
        self._loading[key] = fut
        try:
            value = await load()
        except BaseException as exc:
            fut.set_exception(exc)
            fut.exception()  # mark retrieved: waiters re-raise it themselves
            raise
        finally:
            self._loading.pop(key, None)
        fut.set_result(value)
        return value


class TtlCache(Generic[K, V]):
    """At most `max_entries` values, each fresh for `ttl_s` seconds after it was stored.

    Guarantees: `len(cache) <= max_entries` at all times (LRU eviction); `get` never returns
    a value older than `ttl_s`; `get_or_load` is single-flight, so an expiry under load costs
    one load, not one per request; a load that started before `clear()` does not store its
    (possibly stale) value afterwards; a failed load is not cached.
    """

    def __init__(self, ttl_s: float, max_entries: int = 10_000) -> None:
        if ttl_s <= 0 or max_entries < 1:
            raise ValueError(f"need ttl_s > 0 and max_entries >= 1: {ttl_s=} {max_entries=}")
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self._data: OrderedDict[K, tuple[float, V]] = OrderedDict()
        self._flight: SingleFlight[K, V] = SingleFlight()
        self._generation = 0

    def __len__(self) -> int:
        return len(self._data)

    @property
    def generation(self) -> int:
        """Bumped by every `clear()`: a load begun under an older one must not be stored."""
        return self._generation

    async def get_or_load(self, key: K, load: Callable[[], Awaitable[V]]) -> V:
        hit = self._fresh(key)
        if hit is not None:
            return hit[1]
        generation = self._generation

        async def load_and_store() -> V:
            value = await load()
            if generation == self._generation:
                self.put(key, value)
            return value

        return await self._flight.do(key, load_and_store)

    def get(self, key: K) -> V | None:
        hit = self._fresh(key)
        return None if hit is None else hit[1]

    def contains(self, key: K) -> bool:
        """Whether a fresh value is stored (also for caches whose values may be None)."""
        return self._fresh(key) is not None

    def put(self, key: K, value: V) -> V:
        self._data[key] = (time.monotonic(), value)
        self._data.move_to_end(key)
        while len(self._data) > self.max_entries:
            self._data.popitem(last=False)
        return value

    def pop(self, key: K) -> None:
        self._data.pop(key, None)

    def clear(self) -> None:
        self._data.clear()
        self._generation += 1

    def _fresh(self, key: K) -> tuple[float, V] | None:
        hit = self._data.get(key)
        if hit is None:
            return None
        if time.monotonic() - hit[0] > self.ttl_s:
            del self._data[key]
            return None
        self._data.move_to_end(key)
        return hit
