"""The live view's rolling history: one compact sample of every tracked node per step.

Stored as one Redis stream (`live_history`), one entry per sample time holding every node of
that sample as one JSON table (`fields` once, then one row per node), trimmed by age on every
append (`XADD MINID`), so the stream never holds more than `retention_s` of samples.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import astuple, dataclass, fields
from typing import Final

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from control_plane.state.client import check_client
from control_plane.state.codec import dumps, loads, str_map, text
from control_plane.state.errors import guarded
from control_plane.state.keys import KeySpace

HISTORY: Final = "live_history"
RETENTION_S: Final = 3600.0
"""How much history the stream keeps (one hour; longer ranges come from the SQL rollups)."""
MAX_NODES: Final = 500
"""The most nodes one sample holds (see `HistoryPoint`; the leader chooses which)."""


@dataclass(frozen=True, slots=True)
class HistoryPoint:
    """One node at one sample time: cumulative service (Unified Tokens) and virtual counter,
    the live window's received and demanded rates (UT/s), queue, in-flight, p95 queue wait
    and SLO attainment over the last minute (None while unknown)."""

    key: str
    service: float = 0.0
    service_rate: float = 0.0
    demand_rate: float = 0.0
    counter: float = 0.0
    queued: int = 0
    inflight: int = 0
    wait_p95_s: float | None = None
    slo_attainment_1m: float | None = None


FIELDS: Final = tuple(f.name for f in fields(HistoryPoint))


@dataclass(frozen=True, slots=True)
class HistorySample:
    """Every node recorded at one time (epoch seconds)."""

    t: float
    points: tuple[HistoryPoint, ...]


class LiveHistory:
    """Appends and reads the rolling history of one cluster.

    Rule: `append` writes one entry whose stream id is `now` in milliseconds and removes every
    entry older than `retention_s` before `now` in the same command; it refuses more than
    `max_nodes` points, and skips (→ None) a sample not newer than the last one (a successor
    leader whose clock is behind), so ids stay in time order.
    Guarantee: `read` returns the samples of a time range oldest first, each as written.
    """

    def __init__(
        self,
        redis: Redis,
        keyspace: KeySpace,
        *,
        retention_s: float = RETENTION_S,
        max_nodes: int = MAX_NODES,
    ) -> None:
        self._redis = check_client(redis)
        self.key = keyspace.key(HISTORY)
        self.retention_s = retention_s
        self.max_nodes = max_nodes

    @guarded
    async def append(self, points: Sequence[HistoryPoint], now: float) -> str | None:
        """Record `points` at `now`; → the entry's id (None: skipped, see the class).
        Raises ValueError past `max_nodes`."""
        if len(points) > self.max_nodes:
            raise ValueError(f"{len(points)} nodes in one sample; at most {self.max_nodes}")
        if not math.isfinite(now):
            raise ValueError(f"time must be finite, got {now!r}")
        table = {"fields": FIELDS, "rows": [astuple(p) for p in points]}
        floor = int((now - self.retention_s) * 1000)
        try:
            entry = await self._redis.xadd(
                self.key,
                {"t": repr(float(now)), "nodes": dumps(table)},
                id=f"{int(now * 1000)}-*",
                minid=max(floor, 0),
            )
        except ResponseError as exc:
            if "equal or smaller" not in str(exc):
                raise
            return None
        return text(entry)

    @guarded
    async def read(self, since: float, until: float | None = None) -> list[HistorySample]:
        """The samples taken in [since, until] (by their time), oldest first."""
        lo = f"{max(int(since * 1000), 0)}"
        hi = "+" if until is None else f"{int(until * 1000)}"
        entries = await self._redis.xrange(self.key, min=lo, max=hi)
        return [_sample(str_map(raw or {})) for _id, raw in entries or []]

    @guarded
    async def length(self) -> int:
        """Entries held now."""
        return int(await self._redis.xlen(self.key))


def _sample(raw: dict[str, str]) -> HistorySample:
    table = loads(raw["nodes"])
    names = list(table["fields"])
    points = tuple(
        HistoryPoint(**{n: v for n, v in zip(names, row, strict=True) if n in FIELDS})
        for row in table["rows"]
    )
    return HistorySample(float(raw["t"]), points)
