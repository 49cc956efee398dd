"""The worker registry and the workers' latest scraped metrics."""

from __future__ import annotations

import logging

from redis.asyncio import Redis

from control_plane.contracts.workers import (
    WORKER_STATUSES,
    WorkerEntry,
    WorkerError,
    WorkerSample,
    decode_entry,
    decode_sample,
    encode_entry,
)
from control_plane.state.client import check_client
from control_plane.state.codec import dumps, loads, str_map, text
from control_plane.state.errors import guarded
from control_plane.state.keys import KeySpace
from control_plane.state.scripts import Scripts

log = logging.getLogger(__name__)


class WorkerRegistry:
    """Registered workers (one hash each, JSON field values) and their metrics.

    `upsert` writes the fields a `WorkerEntry` holds into the worker's hash and leaves the
    others (a new worker starts `active`). Metrics are kept apart, one JSON blob per worker
    stamped with `at`, because they change every scrape while the entry rarely does. A hash
    or blob that does not decode is logged and left out, never fatal to a reader.
    """

    def __init__(self, redis: Redis, keyspace: KeySpace) -> None:
        self._redis = check_client(redis)
        self._ks = keyspace
        self._scripts = Scripts(redis)

    @guarded
    async def upsert(self, worker: WorkerEntry) -> None:
        """Create or update a worker entry (only the fields it sets)."""
        key = self._ks.worker(worker.id)
        pipe = self._redis.pipeline(transaction=True)
        pipe.sadd(self._ks.workers, worker.id)
        pipe.hset(key, mapping=encode_entry(worker))  # type: ignore[arg-type]
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
    async def get(self, worker_id: str) -> WorkerEntry | None:
        """One worker's entry, or None (also when its hash does not decode)."""
        return _decoded(worker_id, str_map(await self._redis.hgetall(self._ks.worker(worker_id))))

    @guarded
    async def list(self) -> list[WorkerEntry]:
        """Every registered worker that decodes, sorted by id."""
        ids = sorted(text(i) for i in await self._redis.smembers(self._ks.workers))
        pipe = self._redis.pipeline(transaction=False)
        for worker_id in ids:
            pipe.hgetall(self._ks.worker(worker_id))
        found = zip(ids, await pipe.execute(), strict=True)
        entries = [_decoded(worker_id, str_map(fields)) for worker_id, fields in found]
        return [entry for entry in entries if entry is not None]

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
    async def set_metrics(self, worker_id: str, sample: WorkerSample, now: float) -> None:
        """Store the latest scrape of a worker, stamped with `at` = `now`."""
        blob = dumps({**sample.to_json(), "at": now})
        await self._redis.hset(self._ks.worker_metrics, worker_id, blob)

    @guarded
    async def metrics(self) -> dict[str, tuple[WorkerSample, float]]:
        """Latest scrape per worker id, with the time it was stored."""
        out: dict[str, tuple[WorkerSample, float]] = {}
        for worker_id, blob in str_map(await self._redis.hgetall(self._ks.worker_metrics)).items():
            try:
                data = loads(blob)
                out[worker_id] = (decode_sample(data), float(data.get("at") or 0.0))
            except (ValueError, TypeError, AttributeError) as exc:
                log.warning("metrics of worker %s skipped: %s", worker_id, exc)
        return out


def _decoded(worker_id: str, fields: dict[str, str]) -> WorkerEntry | None:
    try:
        return decode_entry(worker_id, fields)
    except WorkerError as exc:
        log.warning("worker %s skipped: %s", worker_id, exc)
        return None
