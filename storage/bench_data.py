"""Synthetic request history for the report benchmark, and bulk loading of it.

One UTC day (or the part of it inside the range) at a time: generate requests (numpy, seeded),
write them with the fastest path of the dialect (COPY on PostgreSQL, one executemany per day
on SQLite), and write that day's rollup rows computed by the same `rollup_deltas` the recorder
uses. A day's minute, hour and day rollup keys belong to that day only, so they are plain
inserts into an empty table.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from sqlalchemy import Engine, Table

from storage.models import FairnessRollup, RequestRow, table_of
from storage.records import RequestRecord, RequestStatus
from storage.rollup_stats import rollup_deltas

STATUSES: tuple[RequestStatus, ...] = ("ok", "error", "timeout", "aborted", "withdrawn")
STATUS_P = (0.93, 0.02, 0.01, 0.02, 0.02)
SLO_TTFT_MS, SLO_TPOT_MS = 1000.0, 50.0


@dataclasses.dataclass(frozen=True, slots=True)
class Shape:
    """The synthetic hierarchy: tenant i has weight ∝ 1/(i+1)^0.8 of the traffic."""

    tenants: int = 10
    apps: int = 3
    agents: int = 4

    @property
    def agent_count(self) -> int:
        """Leaf nodes."""
        return self.tenants * self.apps * self.agents


def generate_span(
    rng: np.random.Generator, *, start: float, end: float, n: int, shape: Shape, first_id: int
) -> list[RequestRecord]:
    """`n` requests arriving uniformly in [start, end)."""
    share = 1.0 / np.arange(1, shape.tenants + 1) ** 0.8
    tenant = rng.choice(shape.tenants, size=n, p=share / share.sum())
    app, agent = rng.integers(0, shape.apps, n), rng.integers(0, shape.agents, n)
    arrival = start + np.sort(rng.random(n)) * (end - start)
    status = rng.choice(len(STATUSES), size=n, p=STATUS_P)
    started = (status == 0) | (status == 1) | (status == 3)  # timeout/withdrawn never ran
    n_in = np.clip(rng.lognormal(6.0, 1.0, n), 1, 32_000).astype(np.int64)
    n_out = np.where(started, np.clip(rng.lognormal(5.0, 1.0, n), 1, 4096), 0).astype(np.int64)
    queue = rng.exponential(200.0, n)
    ttft = np.where(started, rng.lognormal(np.log(300.0), 0.7, n), np.nan)
    tpot = np.where(started & (n_out > 1), rng.lognormal(np.log(30.0), 0.3, n), np.nan)
    e2e = ttft + np.nan_to_num(tpot) * np.maximum(n_out - 1, 0)
    violated = (ttft > SLO_TTFT_MS) | (tpot > SLO_TPOT_MS) | (status == 1) | (status == 2)
    columns = zip(
        tenant.tolist(), app.tolist(), agent.tolist(), arrival.tolist(), status.tolist(),
        n_in.tolist(), n_out.tolist(), queue.tolist(), ttft.tolist(), tpot.tolist(),
        e2e.tolist(), violated.tolist(), strict=True,
    )  # fmt: skip
    return [_record(first_id + i, *values) for i, values in enumerate(columns)]


def _maybe(value: float) -> float | None:
    return None if value != value else value  # NaN → None


def _record(
    seq: int, t: int, a: int, g: int, arrival: float, status: int, n_in: int, n_out: int,
    queue: float, ttft: float, tpot: float, e2e: float, violated: bool,
) -> RequestRecord:  # fmt: skip
    ttft_ms, e2e_ms = _maybe(ttft), _maybe(e2e)
    return RequestRecord(
        id=f"bench-{seq:09d}", tenant=f"tenant-{t:02d}", app=f"app-{a}", agent=f"agent-{g}",
        arrival=arrival, status=STATUSES[status], model="llama-3-8b", task="chat",
        priority=t % 3, workflow=f"wf-{seq // 5}", dispatched_at=arrival + queue / 1000,
        first_token_at=None if ttft_ms is None else arrival + ttft_ms / 1000,
        finished_at=None if e2e_ms is None else arrival + e2e_ms / 1000,
        n_in=n_in, n_out=n_out, unified_cost=float(n_in + 2 * n_out),
        slo_ttft_ms=SLO_TTFT_MS, slo_tpot_ms=SLO_TPOT_MS, slo_violated=violated,
        ttft_ms=ttft_ms, tpot_ms=_maybe(tpot), e2e_ms=e2e_ms,
        queue_ms=queue, worker=f"w{seq % 8}", policy="vtc",
        error="upstream error" if status == 1 else None,
    )  # fmt: skip


def request_rows(records: Iterable[RequestRecord]) -> list[tuple[Any, ...]]:
    """Column tuples in the table's column order."""
    return [dataclasses.astuple(rec) for rec in records]


def rollup_rows(records: Sequence[RequestRecord]) -> list[tuple[Any, ...]]:
    """The rollup rows of `records`, in the table's column order."""
    names = [c.name for c in table_of(FairnessRollup).columns]
    rows = []
    for key, stats in rollup_deltas(records).items():
        values = {**key._asdict(), **stats.to_columns()}
        rows.append(tuple(values[name] for name in names))
    return rows


REQUEST_TABLE = table_of(RequestRow)
ROLLUP_TABLE = table_of(FairnessRollup)
_RECORD_FIELDS = [f.name for f in dataclasses.fields(RequestRecord)]


def bulk_insert(engine: Engine, table: Table, rows: Sequence[tuple[Any, ...]]) -> None:
    """Append rows to an empty key range of `table` (COPY on PostgreSQL)."""
    names = _RECORD_FIELDS if table is REQUEST_TABLE else [c.name for c in table.columns]
    conn = engine.raw_connection()
    try:
        cursor = conn.cursor()
        if engine.dialect.name == "postgresql":
            with cursor.copy(f"COPY {table.name} ({', '.join(names)}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
        else:
            marks = ", ".join("?" for _ in names)
            cursor.execute("BEGIN IMMEDIATE")
            cursor.executemany(
                f"INSERT INTO {table.name} ({', '.join(names)}) VALUES ({marks})", rows
            )
        conn.commit()
    finally:
        conn.close()
