"""A rollup report's totals come from the coarsest rows covering its range, whatever its series
step: a one-minute series over days reads day rows (and finer rows only at the ragged edges)
for its totals, and those totals equal a minute-by-minute merge and a brute-force count.

Costs and latencies are multiples of 1/8 ms, so every float sum here is exact in any order and
the totals can be compared with `==`."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import func, select

from storage.db import Database
from storage.models import FairnessRollup, table_of
from storage.records import Level, RequestRecord, RequestStatus
from storage.report_windows import DAY, HOUR, MINUTE, minute_range
from storage.repos import RollupRepo, rollups

T0 = 1_699_920_000 + 12_345  # not aligned to a day, an hour or a minute
START = T0 + 5 * HOUR + 17 * MINUTE + 13.5  # ragged at both ends, with three whole days inside
END = START + 3 * DAY + 7 * HOUR + 43 * MINUTE + 20
STATUSES: tuple[RequestStatus, ...] = ("ok", "error", "timeout", "aborted", "withdrawn")
_TABLE = table_of(FairnessRollup)


def _eighths(rng: random.Random, top: int) -> float:
    return rng.randint(1, top * 8) / 8


def _requests(n: int = 4000, span_s: float = 4.5 * DAY) -> list[RequestRecord]:
    rng = random.Random(23)
    rows = []
    for i in range(n):
        status = rng.choices(STATUSES, weights=(8, 1, 1, 1, 1))[0]
        started = status not in ("withdrawn", "timeout")
        ttft = _eighths(rng, 900) if started else None
        rows.append(
            RequestRecord(
                id=f"q{i}", tenant=f"t{rng.randint(0, 1)}", app="a0", agent=f"g{rng.randint(0, 1)}",
                arrival=T0 + i * span_s / n + rng.random() * 60, status=status,
                n_in=rng.randint(10, 4000), n_out=rng.randint(1, 400) if started else 0,
                unified_cost=_eighths(rng, 500), slo_violated=rng.random() < 0.2,
                ttft_ms=ttft, tpot_ms=_eighths(rng, 60) if started else None,
                e2e_ms=None if ttft is None else ttft + _eighths(rng, 5000),
                queue_ms=_eighths(rng, 300) if status != "timeout" else None,
            )
        )  # fmt: skip
    return rows


@pytest.fixture
def rows(db: Database) -> list[RequestRecord]:
    data = _requests()
    for start in range(0, len(data), 500):
        with db.repos() as r:
            r.requests.insert_many(data[start : start + 500])
    return data


def _brute_force(rows: list[RequestRecord], level: Level) -> dict[tuple[str, ...], tuple[Any, ...]]:
    lo, hi = minute_range(START, END)
    width = {"tenant": 1, "app": 2, "agent": 3}[level]
    sums: dict[tuple[str, ...], list[Any]] = {}
    for x in rows:
        if lo <= x.arrival < hi:
            s = sums.setdefault((x.tenant, x.app, x.agent)[:width], [0, 0, 0, 0, 0, 0, 0.0, 0.0, 0])
            finished = x.status != "withdrawn"
            for i, value in enumerate((
                1, x.status == "ok", finished and x.status != "ok", finished and x.slo_violated,
                x.n_in, x.n_out, x.unified_cost, x.ttft_ms or 0.0, x.ttft_ms is not None,
            )):  # fmt: skip
                s[i] += value
    return {path: (*s[:7], s[7] / s[8] if s[8] else None) for path, s in sorted(sums.items())}


@pytest.mark.parametrize("level", ["tenant", "agent"])
def test_totals_do_not_depend_on_the_step(
    db: Database, rows: list[RequestRecord], level: Level
) -> None:
    with db.reader() as r:
        reports = {
            s: r.rollups.report(start=START, end=END, level=level, step=s) for s in (60, 3600, None)
        }
        lo, hi = minute_range(START, END)
        repo = RollupRepo(r.session)  # what the old code read for a one-minute step's totals
        minutes = rollups._where(lo, hi, MINUTE, level, None)
        by_minute = repo._node_counters(level, minutes)
        by_day = repo._node_counters(level, rollups._where(lo, hi, DAY, level, None))
        assert by_minute == by_day
        assert repo._node_latency(level, minutes, by_minute) == repo._node_latency(
            level, rollups._where(lo, hi, DAY, level, None), by_day
        )
    default = reports[None]
    assert default.step == DAY
    for step, report in reports.items():
        assert report.nodes == default.nodes, step
        assert (report.jain_service, report.jain_safi) == (default.jain_service, default.jain_safi)
    fine = reports[60]
    assert [w.start for w in fine.series] == list(range(lo, hi, MINUTE))
    for node in fine.nodes:
        assert sum(w.service[node.key] for w in fine.series) == node.unified_service
    assert {
        n.path: (n.requests, n.ok, n.failed, n.violations, n.n_in, n.n_out, n.unified_service,
                 n.mean_ttft_ms)
        for n in default.nodes
    } == _brute_force(rows, level)  # fmt: skip


def _counting(reads: list[tuple[str, int]], name: str, method: Any) -> Any:
    def counted(self: RollupRepo, level: Level, where: Any, *rest: Any) -> Any:
        count = select(func.count()).select_from(_TABLE).where(where)
        reads.append((name, int(self.session.execute(count).scalar_one())))
        return method(self, level, where, *rest)

    return counted


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, int]]]:
    """(query, rollup rows it reads) for each totals, percentiles and series query."""
    seen: list[tuple[str, int]] = []
    for name in ("_node_counters", "_node_latency", "_windows"):
        monkeypatch.setattr(RollupRepo, name, _counting(seen, name, getattr(RollupRepo, name)))
    yield seen


def test_a_minute_series_reads_day_rows_for_its_totals(
    db: Database, rows: list[RequestRecord], reads: list[tuple[str, int]]
) -> None:
    lo, hi = minute_range(START, END)
    with db.reader() as r:
        r.rollups.report(start=START, end=END, level="agent", step=60)
        fine = dict(reads)
        reads.clear()
        r.rollups.report(start=START, end=END, level="agent")
        default = dict(reads)
        c = _TABLE.c
        minute_rows = r.session.execute(
            select(func.count()).where(
                c.level == "agent", c.window_s == 60, c.bucket >= lo, c.bucket < hi
            )
        ).scalar_one()
    assert fine["_windows"] == minute_rows  # the series keeps its one-minute step
    for query in ("_node_counters", "_node_latency"):  # totals and percentiles: day rows
        assert fine[query] == default[query] == default["_windows"]
        assert fine[query] * 8 < minute_rows, (query, fine[query], minute_rows)
