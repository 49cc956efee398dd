"""The worker registry and the workers' latest scraped metrics."""

from __future__ import annotations

from typing import Any, Final

from redis.asyncio import Redis

from control_plane.state.client import check_client
from control_plane.state.codec import dumps, loads, str_map, text
from control_plane.state.errors import guarded
from control_plane.state.keys import KeySpace
from control_plane.state.scripts import Scripts

WORKER_STATUSES: Final = frozenset({"active", "draining", "unhealthy"})


def _decode(fields: dict[str, str]) -> dict[str, Any] | None:
    return {name: loads(value) for name, value in fields.items()} if fields else None


class WorkerRegistry:
    """Registered workers (one hash each, JSON field values) and their metrics.

    A record has at least `id` and `status` (`active` when first registered without one);
    other fields (url, model, kind, max_num_seqs, kv_tokens, ...) are free. `upsert` merges
    fields into an existing record. Metrics are kept apart, one JSON blob per worker with the
    scrape time `at`, because they change every scrape while the record rarely does.
    """

    def __init__(self, redis: Redis, keyspace: KeySpace) -> None:
        self._redis = check_client(redis)
        self._ks = keyspace
        self._scripts = Scripts(redis)

    @guarded
    async def upsert(self, worker: dict[str, Any]) -> None:
        """Create or update a worker record (must contain a non-empty str `id`)."""
        worker_id = worker.get("id")
        if not isinstance(worker_id, str) or not worker_id:
            raise ValueError("a worker record needs a non-empty string 'id'")
        if "status" in worker and worker["status"] not in WORKER_STATUSES:
            raise ValueError(f"worker status must be one of {sorted(WORKER_STATUSES)}")
        key = self._ks.worker(worker_id)
        pipe = self._redis.pipeline(transaction=True)
        pipe.sadd(self._ks.workers, worker_id)
        pipe.hset(key, mapping={name: dumps(value) for name, value in worker.items()})
        pipe.hsetnx(key, "status", dumps("active"))
        await pipe.execute()

    @guarded
    async def remove(self, worker_id: str) -> bool:
        """Forget a worker and its metrics; False when it was not registered."""
        pipe = self._redis.pipeline(transaction=True)
        pipe.srem(self._ks.workers, worker_id)
        pipe.delete(self._ks.worker(worker_id))
        pipe.hdel(self._ks.worker_metrics, worker_id)
        removed, _, _ = await pipe.execute()
        return bool(removed)

    @guarded
    async def get(self, worker_id: str) -> dict[str, Any] | None:
        """One worker's record, or None."""
        return _decode(str_map(await self._redis.hgetall(self._ks.worker(worker_id))))

    @guarded
    async def list(self) -> list[dict[str, Any]]:
        """Every registered worker, sorted by id."""
        ids = sorted(text(i) for i in await self._redis.smembers(self._ks.workers))
        pipe = self._redis.pipeline(transaction=False)
        for worker_id in ids:
            pipe.hgetall(self._ks.worker(worker_id))
        records = [_decode(str_map(fields)) for fields in await pipe.execute()]
        return [record for record in records if record is not None]

    @guarded
    async def set_status(self, worker_id: str, status: str) -> bool:
        """Set `active`, `draining` or `unhealthy`; False when the worker is not registered."""
        if status not in WORKER_STATUSES:
            raise ValueError(f"worker status must be one of {sorted(WORKER_STATUSES)}")
        result = await self._scripts.call(
            "worker_set_status", [self._ks.worker(worker_id)], [dumps(status)]
        )
        return bool(result)

    @guarded
    async def set_metrics(self, worker_id: str, metrics: dict[str, Any], now: float) -> None:
        """Store the latest metrics of a worker, stamped with `at` = `now`."""
        await self._redis.hset(self._ks.worker_metrics, worker_id, dumps({**metrics, "at": now}))

    @guarded
    async def metrics(self) -> dict[str, dict[str, Any]]:
        """Latest metrics per worker id."""
        raw = await self._redis.hgetall(self._ks.worker_metrics)
        return {worker_id: loads(blob) for worker_id, blob in str_map(raw).items()}
