"""The worker registry and the workers' latest scraped metrics."""

from __future__ import annotations

import logging
from collections.abc import Sequence

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
from control_plane.state import tickets
from control_plane.state.client import check_client
from control_plane.state.codec import dumps, loads, str_map, text
from control_plane.state.errors import StateUnavailable, guarded
from control_plane.state.keys import KeySpace
from control_plane.state.scripts import Scripts

log = logging.getLogger(__name__)

CHANGE_WITHIN_MS = 1_000
"""How late a bounded change may run in Redis (see `WorkerRegistry._write`)."""


class WorkerRegistry:
    """Registered workers (one hash each, JSON field values) and their metrics.

    `upsert` writes the fields a `WorkerEntry` holds into the worker's hash and leaves the
    others (a new worker starts `active`). Metrics are kept apart, one JSON blob per worker
    stamped with `at`, because they change every scrape while the entry rarely does. Every
    change of an entry is one `worker_write.lua` call (atomic; optionally bounded in time). A hash
    or blob that does not decode is logged and left out, never fatal to a reader.
    """

    def __init__(self, redis: Redis, keyspace: KeySpace) -> None:
        self._redis = check_client(redis)
        self._ks = keyspace
        self._scripts = Scripts(redis)

    @guarded
    async def upsert(self, worker: WorkerEntry, *, bounded: bool = False) -> None:
        """Create or update a worker entry (only the fields it sets); see `bounded` below."""
        fields = [x for pair in encode_entry(worker).items() for x in pair]
        await self._write("upsert", worker.id, fields, bounded)

    @guarded
    async def create(self, worker: WorkerEntry) -> bool:
        """Register `worker` only when no entry has its id; → whether it did."""
        fields = [x for pair in encode_entry(worker).items() for x in pair]
        return await self._write("create", worker.id, fields, False) == 1

    @guarded
    async def update(self, worker: WorkerEntry, *, origin: str | None) -> bool:
        """Set the fields `worker` sets on its entry, only while that entry exists and was
        registered by `origin` (None: by nobody named); → whether it did. For a change
        decided on an earlier read: a worker removed, or registered anew, since is left as
        the newer change left it."""
        expected = "" if origin is None else dumps(origin)
        fields = [x for pair in encode_entry(worker).items() for x in pair]
        return await self._write("update", worker.id, [expected, *fields], False) == 1

    @guarded
    async def remove(self, worker_id: str, *, bounded: bool = False) -> bool:
        """Forget a worker and its metrics; False when it was not registered."""
        return await self._write("remove", worker_id, [], bounded) == 1

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
    async def set_status(self, worker_id: str, status: str, *, bounded: bool = False) -> bool:
        """Set `active`, `draining` or `unhealthy`; False when the worker is not registered
        (a removed worker is never re-created)."""
        if status not in WORKER_STATUSES:
            raise ValueError(f"worker status must be one of {sorted(WORKER_STATUSES)}")
        return await self._write("status", worker_id, [dumps(status)], bounded) == 1

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

    async def _write(self, op: str, worker_id: str, args: Sequence[str], bounded: bool) -> int:
        """One `worker_write.lua` call. `bounded`: it must run within `CHANGE_WITHIN_MS` of
        this call on Redis's clock, else it changes nothing and `StateUnavailable` is raised —
        for a caller that must not find its change applied after it timed out (an admin change
        whose SQL record was rolled back). The bound is a ticket (`state/tickets.py`): when the
        reply is lost, it says whether the change ran and what it returned."""
        ks = self._ks
        keys = [ks.workers, ks.worker(worker_id), ks.worker_metrics]
        argv = [op, worker_id, *args]
        if not bounded:
            return int(await self._scripts.call("worker_write", keys, argv))
        ticket = tickets.ticket_key(ks.workers)
        await tickets.issue(self._redis, ticket, CHANGE_WITHIN_MS)
        call = self._scripts.call("worker_write", [*keys, ticket], argv)
        result = await tickets.ticketed(self._redis, call, ticket, CHANGE_WITHIN_MS)
        if result == -2:
            raise StateUnavailable(f"redis ran the change of worker {worker_id!r} too late")
        return result


def _decoded(worker_id: str, fields: dict[str, str]) -> WorkerEntry | None:
    try:
        return decode_entry(worker_id, fields)
    except WorkerError as exc:
        log.warning("worker %s skipped: %s", worker_id, exc)
        return None
